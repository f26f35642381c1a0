"""A tiny synthetic parallel file (word-for-word "translations") and the quick overrides of a translation run."""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["write_pairs", "quick_overrides"]

_WORDS = {f"w{i}": f"t{i}" for i in range(24)}


def write_pairs(path: Path, rows: int = 240, seed: int = 0) -> Path:
    """``path``: a ``source<TAB>target`` file of ``rows`` distinct sentences of 1-5 words, each word mapped to its
    own target word (so a small model learns it)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    lines = ["source\ttarget"]
    while len(lines) <= rows:
        words = [rng.choice(list(_WORDS)) for _ in range(rng.randint(1, 5))]
        source = " ".join(words)
        if source in seen:
            continue
        seen.add(source)
        lines.append(f"{source}\t{' '.join(_WORDS[w] for w in words)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def quick_overrides(path: Path, epochs: int = 2) -> list[str]:
    """Overrides of the ``translation`` recipe for a seconds-long run on :func:`write_pairs`' file."""
    return [
        f"data.path={path}",
        "data.min_words=1",
        "data.max_train_pairs=null",
        "data.max_eval_pairs=null",
        "data.vocab_size=80",
        "data.max_tokens=8",
        "data.valid_sentences=12",
        "data.beam=2",
        "model.d_model=32",
        "model.heads=2",
        "model.feedforward=64",
        "model.encoder_layers=1",
        "model.decoder_layers=1",
        "train.batch_size=32",
        "train.eval_batch_size=32",
        f"train.epochs={epochs}",
        "train.progress=false",
        "train.device=cpu",
    ]

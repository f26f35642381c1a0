"""Small CoNLL files for the tagging tests: made-up sentences generated here, for tests only (not real data).

``write_conll_splits(folder)`` writes ``train.txt``, ``valid.txt`` and ``test.txt`` (token, POS, BIO tag) whose
names (PER) and places (LOC) follow fixed cue words, so a tagger can learn them in one epoch.
"""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["write_conll_splits", "conll_sentence"]

NAMES = [["Ann"], ["Bo", "Li"], ["Cy"], ["Dee", "Ra", "Kay"]]
PLACES = [["Oslo"], ["New", "York"], ["Rome"]]
FILLER = ["the", "a", "went", "saw", "today", "and", "quickly"]


def conll_sentence(rng: random.Random) -> list[tuple[str, str, str]]:
    """One made-up sentence as ``(token, pos, tag)`` rows: ``<name> met <name> in <place> ...``."""
    rows: list[tuple[str, str, str]] = []

    def span(words: list[str], kind: str) -> None:
        rows.extend((w, "NNP", f"{'B' if i == 0 else 'I'}-{kind}") for i, w in enumerate(words))

    span(rng.choice(NAMES), "PER")
    rows.append(("met", "VBD", "O"))
    span(rng.choice(NAMES), "PER")
    rows.append(("in", "IN", "O"))
    span(rng.choice(PLACES), "LOC")
    rows.extend((w, "XX", "O") for w in rng.sample(FILLER, rng.randint(0, 3)))
    return rows


def write_conll_splits(folder: Path, sizes: tuple[int, int, int] = (60, 16, 16), seed: int = 0) -> dict[str, Path]:
    """``{"train", "valid", "test"}`` -> paths of CoNLL files of ``sizes`` sentences (with a -DOCSTART- line)."""
    rng = random.Random(seed)
    paths = {}
    for split, n in zip(("train", "valid", "test"), sizes, strict=True):
        lines = ["-DOCSTART- -X- O", ""]
        for _ in range(n):
            lines += [" ".join(row) for row in conll_sentence(rng)] + [""]
        path = Path(folder) / f"{split}.txt"
        path.write_text("\n".join(lines))
        paths[split] = path
    return paths

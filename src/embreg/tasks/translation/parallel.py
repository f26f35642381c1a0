"""Parallel text: a TSV file of (source, target) pairs, its split by distinct source sentence, and BPE vocabularies.

A pairs file is UTF-8 text with a header line; columns are separated by tabs (no quoting) and every line has as
many columns as the header. The source and target columns are named ``source`` and ``target`` unless the caller
says otherwise; other columns are ignored. The registry's ``trans-de-en`` (:mod:`embreg.data.datasets.trans_de_en`) is such
a file.

:func:`split_by_source` assigns *distinct source sentences* to train/valid/test, so every pair of one source lands
in one split and no test source is seen in training. :func:`train_bpe` learns a byte-pair-encoding vocabulary with
Hugging Face ``tokenizers`` on the training split only; the special tokens ``<pad>``, ``<s>``, ``</s>``, ``<unk>``
take ids 0-3 (:data:`embreg.models.transformer_nmt.SPECIAL_IDS`).

Example:
    >>> pairs = [("a b", "x"), ("a b", "y"), ("c", "z"), ("d", "w")]
    >>> split = split_by_source(pairs, (0.5, 0.25, 0.25), seed=0)
    >>> sorted(len(v) for v in split.values()), {s for s, _ in split["test"]} & {s for s, _ in split["train"]}
    ([1, 1, 2], set())
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embreg.errors import DataError

__all__ = ["SPECIAL_TOKENS", "read_pairs", "split_by_source", "train_bpe", "encode_texts", "tokenizer_from_json"]

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")
"""Special tokens, in id order (0-3)."""

Pair = tuple[str, str]


def read_pairs(path: str | Path, source_col: str = "source", target_col: str = "target") -> list[Pair]:
    """The ``(source, target)`` pairs of a tab-separated file with a header line.

    Args:
        path: the file.
        source_col, target_col: header names of the two columns.

    Raises:
        DataError: naming the file (and line, 1-based, header = line 1): no header, a missing column, a line with
            another number of columns than the header, an empty source or target, or text that is not UTF-8.
    """
    path = Path(path)
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            lines = handle.read().split("\n")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read the pairs file ({exc.strerror})") from None
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or not lines[0].strip():
        raise DataError(f"{path}:1: no header line (expected columns {source_col!r} and {target_col!r})")
    header = lines[0].rstrip("\r").split("\t")
    missing = [col for col in (source_col, target_col) if col not in header]
    if missing:
        raise DataError(f"{path}:1: the header has no column {missing[0]!r}; its columns: {', '.join(header)}")
    s, t = header.index(source_col), header.index(target_col)
    pairs: list[Pair] = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.rstrip("\r").split("\t")
        if len(fields) != len(header):
            raise DataError(
                f"{path}:{number}: {len(fields)} tab-separated column(s), the header has {len(header)} "
                f"({', '.join(header)})"
            )
        source, target = fields[s].strip(), fields[t].strip()
        if not source or not target:
            raise DataError(f"{path}:{number}: empty {source_col if not source else target_col!r} column")
        pairs.append((source, target))
    if not pairs:
        raise DataError(f"{path}: no pairs after the header")
    return pairs


def split_by_source(pairs: Sequence[Pair], fractions: Sequence[float], seed: int) -> dict[str, list[Pair]]:
    """``{"train", "valid", "test"} -> pairs``: distinct sources shuffled (seeded) and cut by ``fractions``.

    Raises:
        DataError: fewer than three distinct sources, or a split would be empty.
    """
    sources = list(dict.fromkeys(source for source, _ in pairs))
    if len(sources) < 3:
        raise DataError(f"{len(sources)} distinct source sentence(s): a train/valid/test split needs at least 3")
    order = np.random.default_rng(seed).permutation(len(sources))
    cuts = np.floor(np.cumsum(fractions)[:2] * len(sources)).astype(int)
    cuts = np.clip(cuts, 1, len(sources) - 1)
    if cuts[1] <= cuts[0]:
        cuts[1] = min(cuts[0] + 1, len(sources) - 1)
    names = ("train", "valid", "test")
    assignment = {}
    for rank, index in enumerate(order):
        assignment[sources[index]] = names[int(np.searchsorted(cuts, rank, side="right"))]
    split: dict[str, list[Pair]] = {name: [] for name in names}
    for pair in pairs:
        split[assignment[pair[0]]].append(pair)
    empty = [name for name, rows in split.items() if not rows]
    if empty:
        raise DataError(f"split {empty[0]!r} is empty with {len(sources)} distinct sources and fractions {fractions}")
    return split


def train_bpe(texts: Sequence[str], vocab_size: int, min_frequency: int = 2) -> Any:
    """A BPE ``tokenizers.Tokenizer`` learnt on ``texts`` (Hugging Face ``tokenizers``; Sennrich et al.'s BPE).

    Pre-tokenisation is ``Metaspace`` (words keep a leading ``▁``), so :meth:`decode` restores the spacing; the
    special tokens of :data:`SPECIAL_TOKENS` get ids 0-3 and unseen characters become ``<unk>``.

    Example:
        >>> tok = train_bpe(["the cat sat", "the cat ran"] * 5, vocab_size=40)
        >>> tok.token_to_id("<pad>"), tok.token_to_id("</s>"), tok.decode(tok.encode("the cat").ids)
        (0, 2, 'the cat')
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS), show_progress=False
    )
    tokenizer.train_from_iterator(list(texts), trainer=trainer)
    return tokenizer


def tokenizer_from_json(text: str) -> Any:
    """A ``tokenizers.Tokenizer`` from its JSON (as a run directory stores it)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(text)


def encode_texts(tokenizer: Any, texts: Sequence[str], max_tokens: int, *, bos: bool) -> list[list[int]]:
    """Token ids of each text, cut to ``max_tokens`` regular tokens, then ``</s>`` (and ``<s>`` first when ``bos``).

    Example:
        >>> tok = train_bpe(["a b c"] * 3, vocab_size=30)
        >>> encode_texts(tok, ["a b"], 8, bos=True)[0][0], encode_texts(tok, ["a b"], 8, bos=False)[0][-1]
        (1, 2)
    """
    encoded = tokenizer.encode_batch(list(texts))
    start = [1] if bos else []
    return [start + e.ids[:max_tokens] + [2] for e in encoded]

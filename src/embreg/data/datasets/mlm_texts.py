"""Texts for masked-LM pre-training: the clothing reviews outside the fine-tuning evaluation sets, the Wikipedia
extract in passages, or a user's plain-text file (one text per line).

Example:
    >>> review_holdout_rows(10, [(0, 2, 3)]) == set(np.random.default_rng(0).permutation(10)[:5].tolist())
    True
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from embreg.errors import DataError

__all__ = ["review_holdout_rows", "read_text_lines", "wiki_passages"]


def review_holdout_rows(num_rows: int, splits: Iterable[tuple[int, int, int]]) -> set[int]:
    """Rows of the reviews in the validation or test set of any of ``splits`` (``(split_seed, valid_size,
    test_size)``), drawn as :func:`embreg.data.labelled_text.few_sample_split` draws them (the first
    ``test_size + valid_size`` rows of the seed's permutation)."""
    rows: set[int] = set()
    for seed, valid, test in splits:
        rows.update(np.random.default_rng(seed).permutation(num_rows)[: valid + test].tolist())
    return rows


def read_text_lines(path: str | Path) -> list[str]:
    """The non-blank lines of a UTF-8 text file, stripped.

    Raises:
        DataError: the file is missing, is not UTF-8 (naming the line), or holds no text.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    texts = []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}, line {number}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
            if line:
                texts.append(line)
    if not texts:
        raise DataError(f"{path}: no text (every line is blank); give one text per line")
    return texts


def wiki_passages(words_per_passage: int, max_articles: int | None = None) -> list[list[str]]:
    """The ``enwiki-gensim`` articles cut into passages of ``words_per_passage`` words, grouped by article."""
    from embreg.data.datasets.wikipedia import ENWIKI_FILE, ENWIKI_NAME, _cached_articles
    from embreg.data.registry import fetch

    articles = _cached_articles(str(fetch(ENWIKI_NAME, progress=False) / ENWIKI_FILE), max_articles)
    return [
        [" ".join(tokens[i : i + words_per_passage]) for i in range(0, len(tokens), words_per_passage)]
        for _, tokens in articles
        if tokens
    ]

"""Two hundred movie-review sentences with their polarity: a tiny binary fine-tuning task.

The ``polarity-200`` dataset is ``pang_lee_polarity.cor`` from gensim 4.4.0's test data
(``gensim/test/test_data/``): 100 negative and 100 positive lower-cased, tokenised sentences in fastText's
``__label__neg text`` format, encoded in Windows-1252. The split is stratified and fixed by ``split_seed``
(default 120 / 40 / 40 sentences, half of each class in every split).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from embreg.data.datasets.catalog import POLARITY_FILE
from embreg.data.labelled_text import SPLITS, SplitSizeError, TextTask
from embreg.data.registry import fetch
from embreg.errors import DataError

__all__ = ["load_polarity", "parse_fasttext_lines"]

_LABELS = ("__label__neg", "__label__pos")


def parse_fasttext_lines(lines: list[str]) -> tuple[list[str], np.ndarray]:
    """Texts and 0/1 labels (neg/pos) of fastText-format lines; blank lines are skipped.

    Example:
        >>> parse_fasttext_lines(["__label__pos a fine film . ", "__label__neg dull"])
        (['a fine film .', 'dull'], array([1, 0]))
    """
    texts, labels = [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        label, _, text = line.strip().partition(" ")
        if label not in _LABELS:
            raise DataError(f"line {number} starts with {label!r}; expected one of {_LABELS}")
        texts.append(text.strip())
        labels.append(_LABELS.index(label))
    return texts, np.asarray(labels, dtype=np.int64)


def load_polarity(
    *,
    valid_size: int = 40,
    test_size: int = 40,
    split_seed: int = 0,
    train_size: int | None = None,
    subset_seed: int = 0,
    path: str | Path | None = None,
) -> TextTask:
    """The polarity task: a stratified split of the 200 sentences.

    Args:
        valid_size, test_size: even sizes of the evaluation sets (half of each class); the rest is training data.
        split_seed: seed of the split.
        train_size: training sentences drawn from the rest (``None``: all of them).
        subset_seed: seed of that draw.
        path: directory holding ``pang_lee_polarity.cor`` (default: ``fetch("polarity-200")``).

    Raises:
        SplitSizeError: ``train_size`` larger than the sentences left for training (``fits`` names the size that fits).

    Example:
        >>> load_polarity().sizes  # doctest: +SKIP
        {'train': 120, 'valid': 40, 'test': 40}
    """
    if valid_size < 2 or test_size < 2 or valid_size % 2 or test_size % 2:
        raise DataError(f"valid_size={valid_size} and test_size={test_size} must be even and >= 2 (stratified)")
    directory = fetch("polarity-200") if path is None else Path(path)
    file = directory / POLARITY_FILE
    if not file.is_file():
        raise DataError(f"{directory} lacks {POLARITY_FILE}; run embreg.data.fetch('polarity-200')")
    texts, labels = parse_fasttext_lines(file.read_text(encoding="cp1252").splitlines())
    rng = np.random.default_rng(split_seed)
    split: dict[str, list[int]] = {s: [] for s in SPLITS}
    for cls in (0, 1):
        rows = rng.permutation(np.flatnonzero(labels == cls))
        n_test, n_valid = test_size // 2, valid_size // 2
        if rows.size <= n_test + n_valid:
            raise DataError(f"class {cls} has {rows.size} sentences; valid_size + test_size leaves none to train on")
        split["test"] += rows[:n_test].tolist()
        split["valid"] += rows[n_test : n_test + n_valid].tolist()
        split["train"] += rows[n_test + n_valid :].tolist()
    if train_size is not None:
        pool = len(split["train"])
        if train_size > pool:
            raise SplitSizeError(
                f"train_size={train_size} is more than the {pool} polarity sentences left for training",
                {"train_size": pool},
            )
        split["train"] = np.random.default_rng(subset_seed).choice(split["train"], train_size, replace=False).tolist()
    index = {s: np.sort(np.asarray(split[s])) for s in SPLITS}
    record = {
        "dataset": "polarity-200",
        "split_seed": split_seed,
        "train_size": train_size,
        "subset_seed": subset_seed,
        "sizes": {s: int(index[s].size) for s in SPLITS},
    }
    return TextTask(
        "polarity",
        "classification",
        2,
        {s: [texts[i] for i in index[s]] for s in SPLITS},
        {s: labels[index[s]] for s in SPLITS},
        ("negative", "positive"),
        record,
    )

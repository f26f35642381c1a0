"""Labelled text tasks for fine-tuning: texts and labels per split, and few-sample training subsets.

A :class:`TextTask` holds ``train``/``valid``/``test`` texts with integer class labels (classification) or float
targets (regression). :func:`few_sample_split` makes the splits the LNSR paper's few-sample study needs
(lnsr-noise-stability-bert.txt, Sec. 5.2 and Fig. 4): validation and test sets fixed by ``split_seed`` alone, and
a training subset of any size drawn from the remaining pool by ``subset_seed``. Subsets of one ``subset_seed``
are nested (the 250 examples are the first 250 of the 500, ...), so a curve over training-set size changes one
thing at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from embreg.errors import DataError

__all__ = ["TextTask", "MultiTargetTask", "few_sample_split", "SplitSizeError"]

SPLITS = ("train", "valid", "test")


class SplitSizeError(DataError):
    """Split sizes that the rows of a file cannot hold; ``fits`` holds sizes that would (argument -> value).

    Example:
        >>> error = SplitSizeError("train_size=100 is too large", {"train_size": 40})
        >>> error.fits
        {'train_size': 40}
    """

    def __init__(self, message: str, fits: dict[str, int]) -> None:
        super().__init__(message)
        self.fits = dict(fits)


@dataclass(frozen=True)
class TextTask:
    """A labelled text task split into ``train``, ``valid`` and ``test``.

    Attributes:
        name: e.g. ``"reviews-binary"``.
        kind: ``"classification"`` (labels are int64 class ids) or ``"regression"`` (float32 targets).
        num_labels: number of classes; 1 for regression.
        texts: ``{split: [text, ...]}``.
        labels: ``{split: (N,) array}``.
        label_names: class names (empty for regression).
        record: how the splits were made (dataset, seeds, sizes), written to a run directory.

    Example:
        >>> task = TextTask("toy", "classification", 2, {s: ["good", "bad"] for s in SPLITS},
        ...                 {s: np.array([1, 0]) for s in SPLITS}, ("neg", "pos"))
        >>> task.sizes
        {'train': 2, 'valid': 2, 'test': 2}
    """

    name: str
    kind: Literal["classification", "regression"]
    num_labels: int
    texts: dict[str, list[str]]
    labels: dict[str, np.ndarray]
    label_names: tuple[str, ...] = ()
    record: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("classification", "regression"):
            raise DataError(f"kind={self.kind!r} must be 'classification' or 'regression'")
        if self.kind == "regression" and self.num_labels != 1:
            raise DataError(f"a regression task has num_labels=1, got {self.num_labels}")
        if self.kind == "classification" and self.num_labels < 2:
            raise DataError(f"a classification task needs num_labels >= 2, got {self.num_labels}")
        for split in SPLITS:
            if split not in self.texts or split not in self.labels:
                raise DataError(f"task {self.name!r} lacks the {split!r} split; it needs {SPLITS}")
            if len(self.texts[split]) != len(self.labels[split]):
                raise DataError(
                    f"split {split!r} has {len(self.texts[split])} texts but {len(self.labels[split])} labels"
                )
            if self.kind == "classification" and len(self.labels[split]):
                labels = self.labels[split]
                if labels.min() < 0 or labels.max() >= self.num_labels:
                    raise DataError(f"split {split!r} has labels outside [0, {self.num_labels - 1}]")

    @property
    def sizes(self) -> dict[str, int]:
        """Examples per split."""
        return {split: len(self.texts[split]) for split in SPLITS}


def few_sample_split(
    num_rows: int,
    *,
    train_size: int | None,
    valid_size: int,
    test_size: int,
    split_seed: int = 0,
    subset_seed: int = 0,
) -> dict[str, np.ndarray]:
    """Row indices of a fixed validation and test set and a (few-sample) training subset of the rest.

    ``split_seed`` permutes the rows once: the first ``test_size`` are the test set, the next ``valid_size`` the
    validation set, the rest the training pool. ``subset_seed`` permutes the pool, and the training set is the
    first ``train_size`` of that order (``None``: the whole pool).

    Args:
        num_rows: rows in the dataset.
        train_size: training examples, in ``[1, num_rows - valid_size - test_size]``, or ``None``.
        valid_size, test_size: sizes of the fixed evaluation sets (>= 1).
        split_seed: seed of the evaluation sets.
        subset_seed: seed of the training subset.

    Returns:
        ``{"train", "valid", "test"}`` -> sorted int64 row indices.

    Example:
        >>> s = few_sample_split(100, train_size=10, valid_size=20, test_size=30)
        >>> [len(s[k]) for k in ("train", "valid", "test")]
        [10, 20, 30]
        >>> set(few_sample_split(100, train_size=5, valid_size=20, test_size=30)["train"]) <= set(s["train"])
        True
    """
    if valid_size < 1 or test_size < 1:
        raise DataError(f"valid_size={valid_size} and test_size={test_size} must both be >= 1")
    pool_size = num_rows - valid_size - test_size
    if pool_size < 1:
        raise DataError(f"valid_size + test_size = {valid_size + test_size} leaves no training rows of {num_rows}")
    if train_size is not None and not 1 <= train_size <= pool_size:
        raise DataError(f"train_size={train_size} is outside [1, {pool_size}] (rows left after the evaluation sets)")
    order = np.random.default_rng(split_seed).permutation(num_rows)
    test, valid, pool = order[:test_size], order[test_size : test_size + valid_size], order[test_size + valid_size :]
    pool = pool[np.random.default_rng([split_seed, subset_seed]).permutation(pool.size)]
    train = pool if train_size is None else pool[:train_size]
    return {"train": np.sort(train), "valid": np.sort(valid), "test": np.sort(test)}


@dataclass(frozen=True)
class MultiTargetTask:
    """Texts with several class labels each (multi-task learning): one column of ``labels`` per target.

    Attributes:
        name: e.g. ``"reviews-recommended+rating"``.
        targets: ``((target name, number of classes), ...)`` in column order.
        texts: ``{split: [text, ...]}``.
        labels: ``{split: (N, K) int64 array}``, column ``k`` the class ids of target ``k``.
        record: how the splits were made, written to a run directory.
        label_names: per target, its class names (empty: the class ids as text).

    Example:
        >>> task = MultiTargetTask("toy", (("a", 2), ("b", 3)), {s: ["x", "y"] for s in SPLITS},
        ...                        {s: np.array([[1, 2], [0, 0]]) for s in SPLITS})
        >>> task.kind, task.sizes["train"], task.target_names
        ('classification', 2, ('a', 'b'))
    """

    name: str
    targets: tuple[tuple[str, int], ...]
    texts: dict[str, list[str]]
    labels: dict[str, np.ndarray]
    record: dict[str, object] = field(default_factory=dict)
    label_names: tuple[tuple[str, ...], ...] = ()
    kind: Literal["classification"] = "classification"

    def __post_init__(self) -> None:
        if len(self.targets) < 2:
            raise DataError(f"a multi-target task needs two or more targets, got {[t for t, _ in self.targets]}")
        for split in SPLITS:
            if split not in self.texts or split not in self.labels:
                raise DataError(f"task {self.name!r} lacks the {split!r} split; it needs {SPLITS}")
            labels = self.labels[split]
            if labels.ndim != 2 or labels.shape != (len(self.texts[split]), len(self.targets)):
                raise DataError(
                    f"split {split!r}: labels of shape {labels.shape} do not fit {len(self.texts[split])} texts "
                    f"x {len(self.targets)} targets"
                )
            for k, (target, classes) in enumerate(self.targets):
                if len(labels) and (labels[:, k].min() < 0 or labels[:, k].max() >= classes):
                    raise DataError(f"split {split!r}: target {target!r} has labels outside [0, {classes - 1}]")

    @property
    def target_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.targets)

    def class_names(self, k: int) -> tuple[str, ...]:
        """The class names of target ``k`` (its ids as text when the task names none)."""
        if self.label_names:
            return self.label_names[k]
        return tuple(str(i) for i in range(self.targets[k][1]))

    @property
    def sizes(self) -> dict[str, int]:
        """Examples per split."""
        return {split: len(self.texts[split]) for split in SPLITS}

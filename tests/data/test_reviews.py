"""Clothing-reviews tasks and few-sample splits (unit), and the real table (integration)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from embreg.data import few_sample_split, load_reviews
from embreg.data.datasets.reviews import reviews_frame, reviews_task
from embreg.errors import DataError


def _raw(n: int = 30) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "Title": [f"t{i}" if i % 3 else None for i in range(n)],
            "Review Text": [f"text {i}" if i % 7 else None for i in range(n)],
            "Rating": rng.integers(1, 6, n),
            "Recommended IND": rng.integers(0, 2, n),
        }
    )


def test_frame_joins_title_and_body_and_drops_empty_reviews() -> None:
    frame = reviews_frame(_raw())
    assert len(frame) == 30 - 5  # rows 0, 7, 14, 21, 28 have no text
    assert frame["text"].iloc[0] == "t1. text 1"  # row 0 had no text
    assert "text 3" in frame["text"].tolist()  # no title: the body alone


def test_tasks_map_labels() -> None:
    frame = reviews_frame(_raw())
    split = few_sample_split(len(frame), train_size=5, valid_size=5, test_size=5)
    binary, rating, regression = (reviews_task(frame, t, split) for t in ("binary", "rating", "regression"))
    rows = split["train"]
    assert binary.labels["train"].tolist() == frame["recommended"].to_numpy()[rows].tolist()
    assert rating.labels["train"].tolist() == (frame["rating"].to_numpy()[rows] - 1).tolist()
    assert regression.kind == "regression" and regression.labels["train"].dtype == np.float32
    with pytest.raises(DataError, match="unknown reviews task 'stars'"):
        reviews_task(frame, "stars", split)


def test_few_sample_splits_are_fixed_disjoint_and_nested() -> None:
    small = few_sample_split(1000, train_size=50, valid_size=100, test_size=200, subset_seed=0)
    large = few_sample_split(1000, train_size=400, valid_size=100, test_size=200, subset_seed=0)
    other = few_sample_split(1000, train_size=50, valid_size=100, test_size=200, subset_seed=1)
    for s in (small, large, other):
        assert np.array_equal(s["valid"], small["valid"]) and np.array_equal(s["test"], small["test"])
        assert not set(s["train"]) & (set(s["valid"]) | set(s["test"]))
    assert set(small["train"]) < set(large["train"]) and set(small["train"]) != set(other["train"])
    assert few_sample_split(1000, train_size=None, valid_size=100, test_size=200)["train"].size == 700
    with pytest.raises(DataError, match=r"train_size=800 is outside \[1, 700\]"):
        few_sample_split(1000, train_size=800, valid_size=100, test_size=200)


@pytest.mark.integration
def test_real_reviews_tasks() -> None:
    task = load_reviews("binary", train_size=250)
    assert task.sizes == {"train": 250, "valid": 1000, "test": 2000}
    assert 0.75 < task.labels["test"].mean() < 0.88  # 82% of reviewers recommend the item
    rating = load_reviews("rating", train_size=250)
    assert set(np.unique(rating.labels["test"])) == {0, 1, 2, 3, 4}
    assert rating.texts["test"] == task.texts["test"] and rating.record["sizes"]["train"] == 250

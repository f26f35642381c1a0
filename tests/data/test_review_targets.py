"""The reviews with several targets: the single tasks' splits, texts and labels, one column per target."""

from __future__ import annotations

import numpy as np
import pytest

from embreg.data.datasets.reviews import load_review_targets, load_reviews
from embreg.data.labelled_text import SPLITS, MultiTargetTask
from embreg.errors import DataError


@pytest.mark.integration
def test_each_column_is_the_single_tasks_labels_on_the_same_rows() -> None:
    sizes = {"train_size": 50, "valid_size": 20, "test_size": 30, "split_seed": 3, "subset_seed": 1}
    multi = load_review_targets(["rating", "recommended"], **sizes)
    binary, rating = load_reviews("binary", **sizes), load_reviews("rating", **sizes)
    assert multi.targets == (("rating", 5), ("recommended", 2))
    assert multi.class_names(1) == ("not recommended", "recommended")
    for split in SPLITS:
        assert multi.texts[split] == binary.texts[split] == rating.texts[split]
        assert np.array_equal(multi.labels[split][:, 0], rating.labels[split])
        assert np.array_equal(multi.labels[split][:, 1], binary.labels[split])


def test_bad_targets_and_labels_are_named() -> None:
    with pytest.raises(DataError, match=r"unknown reviews targets \['stars'\]"):
        load_review_targets(["rating", "stars"])
    texts = {s: ["a", "b"] for s in SPLITS}
    with pytest.raises(DataError, match="target 'b' has labels outside \\[0, 2\\]"):
        MultiTargetTask("t", (("a", 2), ("b", 3)), texts, {s: np.array([[0, 3], [1, 0]]) for s in SPLITS})
    with pytest.raises(DataError, match="do not fit 2 texts x 2 targets"):
        MultiTargetTask("t", (("a", 2), ("b", 3)), texts, {s: np.array([0, 1]) for s in SPLITS})
    with pytest.raises(DataError, match="two or more targets"):
        MultiTargetTask("t", (("a", 2),), texts, {s: np.array([[0], [1]]) for s in SPLITS})

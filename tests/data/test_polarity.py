"""The 200 polarity sentences: fastText-format parsing (unit) and the stratified split (integration)."""

from __future__ import annotations

import numpy as np
import pytest

from embreg.data import load_polarity
from embreg.data.polarity import parse_fasttext_lines
from embreg.errors import DataError


def test_parse_lines_and_reject_unknown_labels() -> None:
    texts, labels = parse_fasttext_lines(["__label__neg dull . ", "", "__label__pos fine"])
    assert texts == ["dull .", "fine"] and labels.tolist() == [0, 1]
    with pytest.raises(DataError, match="line 1 starts with '__label__meh'"):
        parse_fasttext_lines(["__label__meh so-so"])


def test_split_sizes_must_be_even() -> None:
    with pytest.raises(DataError, match="must be even"):
        load_polarity(valid_size=3)


@pytest.mark.integration
def test_real_polarity_split_is_stratified_and_fixed() -> None:
    task = load_polarity()
    assert task.sizes == {"train": 120, "valid": 40, "test": 40}
    assert all(task.labels[s].mean() == 0.5 for s in ("train", "valid", "test"))
    assert any(
        "\u2014" in t or "clich\u00e9s" in t for t in task.texts["train"] + task.texts["valid"] + task.texts["test"]
    )
    again = load_polarity()
    assert again.texts["test"] == task.texts["test"]
    reshuffled = load_polarity(split_seed=1)
    assert reshuffled.texts["test"] != task.texts["test"]
    assert np.array_equal(reshuffled.labels["test"], task.labels["test"])  # still 20 of each class

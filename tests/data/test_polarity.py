"""The 200 polarity sentences: fastText-format parsing (unit) and the stratified split (integration)."""

from __future__ import annotations

import numpy as np
import pytest

from embreg.data import load_polarity
from embreg.data.datasets.polarity import parse_fasttext_lines
from embreg.data.labelled_text import SplitSizeError
from embreg.errors import ConfigError, DataError


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


@pytest.mark.integration
def test_train_size_draws_a_subset_of_the_training_sentences_and_a_larger_one_is_refused() -> None:
    full = load_polarity()
    subset = load_polarity(train_size=32, subset_seed=3)
    assert subset.sizes == {"train": 32, "valid": 40, "test": 40}
    assert set(subset.texts["train"]) <= set(full.texts["train"])
    assert subset.texts["test"] == full.texts["test"]
    assert load_polarity(train_size=32, subset_seed=4).texts["train"] != subset.texts["train"]
    with pytest.raises(SplitSizeError, match="train_size=121 is more than the 120") as error:
        load_polarity(train_size=121)
    assert error.value.fits == {"train_size": 120}


def test_the_recipe_refuses_a_train_size_polarity_cannot_hold() -> None:
    from embreg.recipes import load_recipe
    from embreg.tasks.text.task import load_text_task

    recipe = load_recipe("ft-polarity", ["data.train_size=1000"])
    with pytest.raises(ConfigError, match=r"--set data.train_size=120 or data.train_size=null"):
        load_text_task(recipe)

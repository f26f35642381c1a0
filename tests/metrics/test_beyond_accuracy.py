"""Beyond-accuracy metrics equal RecBole's formulas on hand-made lists, and runs report them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embreg.errors import EmbregError
from embreg.metrics.beyond_accuracy import (
    average_popularity,
    beyond_accuracy_metrics,
    gini_index,
    item_coverage,
    tail_items,
    tail_percentage,
)

# three users' top-3 lists over a catalogue of 6 items; training counts of items 0..5
LISTS = np.array([[0, 1, 2], [0, 1, 3], [0, 4, 1]])
COUNTS = np.array([50, 20, 9, 3, 1, 0])


def test_coverage_is_the_share_of_items_recommended_to_anyone() -> None:
    assert item_coverage(LISTS, 6) == pytest.approx(5 / 6)
    assert item_coverage(LISTS[:, :1], 6) == pytest.approx(1 / 6)


def test_average_popularity_is_the_mean_training_count_per_list_then_user() -> None:
    by_user = [(50 + 20 + 9) / 3, (50 + 20 + 3) / 3, (50 + 1 + 20) / 3]
    assert average_popularity(LISTS, COUNTS) == pytest.approx(np.mean(by_user))


def test_gini_is_the_gini_coefficient_of_recommendation_counts_over_the_catalogue() -> None:
    appearances = np.array([3, 3, 1, 1, 1, 0], dtype=float)  # items 0..5 in the lists
    x = np.sort(appearances)
    n = len(x)
    expected = np.sum((2 * np.arange(1, n + 1) - n - 1) * x) / (n * x.sum())
    assert gini_index(LISTS, 6) == pytest.approx(expected)
    assert gini_index(np.array([[0, 1], [2, 3], [4, 5]]), 6) == pytest.approx(0.0)  # perfectly even
    assert gini_index(np.array([[0], [0], [0]]), 6) == pytest.approx(5 / 6)  # one item takes every slot


def test_tail_is_the_rarest_tenth_of_trained_items_or_a_count_threshold() -> None:
    # 5 items were seen in training: the tail is max(int(5 * 0.1), 1) = 1 item, the rarest (item 4)
    assert tail_items(COUNTS).tolist() == [False, False, False, False, True, False]
    assert tail_items(COUNTS, ratio=0.4).tolist() == [False, False, False, True, True, False]
    assert tail_items(COUNTS, ratio=9).tolist() == [False, False, True, True, True, False]
    assert tail_percentage(LISTS, COUNTS) == pytest.approx(np.mean([0, 0, 1 / 3]))
    assert tail_percentage(LISTS, COUNTS, ratio=0.4) == pytest.approx(np.mean([0, 1 / 3, 1 / 3]))


def test_all_metrics_at_each_cut_off_and_bad_lists_refused() -> None:
    metrics = beyond_accuracy_metrics(torch.from_numpy(LISTS), COUNTS, ks=(1, 3))
    assert metrics["coverage@1"] == pytest.approx(1 / 6) and metrics["avg_popularity@1"] == 50
    assert metrics["gini@3"] == pytest.approx(gini_index(LISTS, 6))
    assert sorted(metrics) == sorted(
        f"{m}@{k}" for m in ("coverage", "avg_popularity", "gini", "tail_percentage") for k in (1, 3)
    )
    with pytest.raises(EmbregError, match="exceeds"):
        beyond_accuracy_metrics(LISTS, COUNTS, ks=(4,))
    with pytest.raises(EmbregError, match="valid range"):
        item_coverage(np.array([[7]]), 6)


@pytest.mark.parametrize("recipe", ["bpr", "sasrec"])
def test_ranking_and_next_item_runs_report_them_and_compare_shows_them(recipe: str, tmp_path) -> None:
    from embreg.analysis.compare import compare_runs, format_markdown
    from embreg.recipes import load_recipe
    from embreg.recipes.run import run_single

    overrides = ["data.max_rows=2000", "train.epochs=1", "train.progress=false"]
    if recipe == "sasrec":
        overrides += ["data.max_len=10", "data.eval_negatives=10", "train.batch_size=32"]
    metrics = run_single(load_recipe(recipe, overrides), tmp_path / "run").metrics
    for name in ("coverage@10", "avg_popularity@10", "gini@10", "tail_percentage@10"):
        assert 0 <= metrics[f"test_{name}"] and f"val_{name}" in metrics
    assert 0 < metrics["test_coverage@10"] <= 1 and 0 <= metrics["test_gini@10"] <= 1
    assert "test_gini@10" in format_markdown(compare_runs([tmp_path / "run", tmp_path / "run"]))

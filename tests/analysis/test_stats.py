"""Tests of ``embreg.analysis.stats``: run summaries and significance tests."""

import math
import statistics

import numpy as np
import pytest
from scipy import stats as scipy_stats

from embreg.analysis.stats import (
    mann_whitney_u,
    median_interval,
    summarize,
    summarize_runs,
    target_verdict,
    welch_t_test,
)
from embreg.errors import EmbregError


def test_summarize_hand_computed() -> None:
    s = summarize([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert s["mean"] == pytest.approx(5.0)
    assert s["std"] == pytest.approx(math.sqrt(32 / 7))  # sample std, ddof=1
    assert s["median"] == pytest.approx(4.5)
    assert (s["min"], s["max"], s["n"]) == (2.0, 9.0, 8)
    assert s["values"] == [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
    assert set(s) == {"mean", "std", "median", "min", "max", "values", "n"}


def test_summarize_matches_numpy_on_random_values() -> None:
    values = np.random.default_rng(0).normal(size=11)
    s = summarize(list(values))
    assert s["mean"] == pytest.approx(float(np.mean(values)), rel=1e-12)
    assert s["std"] == pytest.approx(float(np.std(values, ddof=1)), rel=1e-12)
    assert s["median"] == pytest.approx(float(np.median(values)), rel=1e-12)


def test_summarize_single_value_has_zero_std_and_plain_types() -> None:
    s = summarize([np.float32(0.5)])
    assert s == {"mean": 0.5, "std": 0.0, "median": 0.5, "min": 0.5, "max": 0.5, "values": [0.5], "n": 1}
    assert all(type(s[key]) is float for key in ("mean", "std", "median", "min", "max"))


@pytest.mark.parametrize(
    ("values", "fragment"),
    [([], "empty"), ([1.0, "x"], r"values\[1\] must be a real number, got str 'x'"), ([True], "got bool")],
)
def test_summarize_rejects_bad_input(values, fragment) -> None:
    with pytest.raises(EmbregError, match=fragment):
        summarize(values)


def test_welch_matches_scipy_on_random_groups() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.0, 1.0, 8), rng.normal(0.7, 2.0, 5)
    expected = scipy_stats.ttest_ind(a, b, equal_var=False).pvalue
    assert welch_t_test(list(a), list(b)) == pytest.approx(expected, rel=1e-12)
    assert welch_t_test(list(a), list(b)) == pytest.approx(welch_t_test(list(b), list(a)), rel=1e-12)


def test_welch_hand_computed() -> None:
    # a = [1, 2, 3], b = [4, 5, 6]: t = -3 / sqrt(1/3 + 1/3), df = 4 (equal variances and sizes).
    t = -3 / math.sqrt(2 / 3)
    expected = 2 * scipy_stats.t.sf(abs(t), df=4)
    assert welch_t_test([1, 2, 3], [4, 5, 6]) == pytest.approx(expected, rel=1e-10)


def test_mann_whitney_matches_scipy_and_hand_computed() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(0.0, 1.0, 6), rng.normal(1.0, 1.0, 7)
    expected = scipy_stats.mannwhitneyu(a, b, alternative="two-sided").pvalue
    assert mann_whitney_u(list(a), list(b)) == pytest.approx(expected, rel=1e-12)
    # Complete separation of 3 vs 3: exact two-sided p = 2 / C(6, 3) = 0.1.
    assert mann_whitney_u([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)


@pytest.mark.parametrize("test", [welch_t_test, mann_whitney_u])
def test_degenerate_cases_follow_documented_rules(test) -> None:
    assert math.isnan(test([1.0], [1.0, 2.0]))
    assert math.isnan(test([1.0, 2.0], []))
    assert math.isnan(test([1.0, float("nan")], [1.0, 2.0]))
    assert math.isnan(test([1.0, float("inf")], [1.0, 2.0]))
    assert test([0.5, 0.5, 0.5], [0.5, 0.5]) == 1.0


def test_welch_zero_variance_different_means_is_zero() -> None:
    assert welch_t_test([1.0, 1.0], [2.0, 2.0, 2.0]) == 0.0


def test_p_values_are_probabilities() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        a, b = list(rng.normal(size=4)), list(rng.normal(size=5))
        assert 0.0 <= welch_t_test(a, b) <= 1.0
        assert 0.0 <= mann_whitney_u(a, b) <= 1.0


def test_summarize_runs_per_metric_in_first_run_order() -> None:
    runs = [{"rmse": 0.9, "mae": 0.7}, {"mae": 0.8, "rmse": 1.1}]
    summary = summarize_runs(runs)
    assert list(summary) == ["rmse", "mae"]
    assert summary["rmse"]["mean"] == pytest.approx(1.0)
    assert summary["mae"]["values"] == [0.7, 0.8]
    assert summary["mae"]["n"] == 2


def test_summarize_runs_rejects_empty_and_mismatched_runs() -> None:
    with pytest.raises(EmbregError, match="empty list"):
        summarize_runs([])
    expected = r"run 1 reports different metrics from run 0: missing \['mae'\], extra \['x'\]"
    with pytest.raises(EmbregError, match=expected):
        summarize_runs([{"rmse": 1.0, "mae": 1.0}, {"rmse": 1.0, "x": 2.0}])


def test_median_interval_brackets_the_median_and_is_reproducible() -> None:
    values = [1.52, 1.77, 1.61, 1.70, 1.58, 1.66, 1.73, 1.55, 1.69, 1.64]
    low, high = median_interval(values)
    assert low <= statistics.median(values) <= high
    assert min(values) <= low < high <= max(values)
    assert median_interval(values) == (low, high)
    assert median_interval(values, confidence=0.5)[1] - median_interval(values, confidence=0.5)[0] < high - low


def test_median_interval_degenerate_and_bad_input() -> None:
    assert median_interval([2.0]) == (2.0, 2.0)
    assert median_interval([3.0, 3.0, 3.0]) == (3.0, 3.0)
    with pytest.raises(EmbregError, match="empty"):
        median_interval([])
    with pytest.raises(EmbregError, match="finite"):
        median_interval([1.0, float("nan")])
    with pytest.raises(EmbregError, match=r"confidence=1.0 is outside the valid range \(0, 1\)"):
        median_interval([1.0, 2.0], confidence=1.0)


@pytest.mark.parametrize(
    ("low", "high", "target", "expected"),
    [
        (1.5, 1.7, 1.7, "met"),
        (1.5, 1.71, 1.7, "at limit"),
        (1.7, 1.8, 1.7, "at limit"),
        (1.71, 1.8, 1.7, "missed"),
        (1.0, 2.0, None, "—"),
    ],
)
def test_target_verdict(low, high, target, expected) -> None:
    assert target_verdict(low, high, target) == expected


def test_target_verdict_rejects_reversed_interval() -> None:
    with pytest.raises(EmbregError, match="low=2.0 is above high=1.0"):
        target_verdict(2.0, 1.0, 1.5)

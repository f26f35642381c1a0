"""Statistics over repeated runs: summaries per metric and two-sample significance tests.

A multi-seed run reports each metric as mean, sample standard deviation, median, min and max over seeds
(:func:`summarize_runs`); ``embreg compare`` asks whether two runs differ with Welch's t-test (unequal
variances) and the Mann-Whitney U test (rank based, no normality assumption). Benchmarks with a target ratio
(e.g. "step time at most 1.7x plain") report the median of repeated ratios with a bootstrap interval
(:func:`median_interval`) and say whether the interval clears the target (:func:`target_verdict`).

Example:
    >>> summary = summarize_runs([{"rmse": 0.90}, {"rmse": 0.92}, {"rmse": 0.91}])
    >>> round(summary["rmse"]["mean"], 4), summary["rmse"]["n"]
    (0.91, 3)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from numbers import Real
from typing import Any

from embreg.errors import EmbregError

__all__ = [
    "summarize",
    "welch_t_test",
    "one_sample_t_test",
    "mann_whitney_u",
    "summarize_runs",
    "median_interval",
    "target_verdict",
]


def _floats(values: Sequence[float], name: str) -> list[float]:
    if isinstance(values, (str, bytes)):
        raise EmbregError(f"{name} must be a sequence of numbers, got the string {values!r}")
    result: list[float] = []
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, Real):
            raise EmbregError(f"{name}[{i}] must be a real number, got {type(value).__name__} {value!r}")
        result.append(float(value))
    return result


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sample standard deviation (ddof=1), median, min, max, the values and their count.

    The standard deviation of a single value is 0.0. NaN values propagate into mean, std and median.

    Args:
        values: at least one real number.

    Returns:
        ``{"mean", "std", "median", "min", "max": float, "values": list[float], "n": int}``.

    Example:
        >>> summarize([1.0, 2.0, 6.0])["median"]
        2.0
        >>> summarize([3.0])["std"]
        0.0
    """
    data = _floats(values, "values")
    if not data:
        raise EmbregError("cannot summarize an empty list of values; need at least one")
    n = len(data)
    mean = math.fsum(data) / n
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in data) / (n - 1)) if n > 1 else 0.0
    return {
        "mean": mean,
        "std": std,
        "median": float(statistics.median(data)),
        "min": min(data),
        "max": max(data),
        "values": data,
        "n": n,
    }


def _undefined(a: list[float], b: list[float]) -> bool:
    """Shared rule: a test is undefined (NaN) when a group has fewer than two values or any value is not finite."""
    return len(a) < 2 or len(b) < 2 or not all(math.isfinite(x) for x in a + b)


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test (means of two groups with possibly unequal variances).

    Rules where the test is degenerate, so callers never see a surprise: NaN when either group has fewer
    than two values or holds a non-finite value; when both groups have zero variance, 1.0 if their means are
    equal and 0.0 if not (the limit of the statistic, which is then infinite).

    Args:
        a: values of the first group, e.g. a metric over seeds.
        b: values of the second group.

    Returns:
        The p-value in ``[0, 1]``, or NaN as above.

    Example:
        >>> round(welch_t_test([0.90, 0.91, 0.92], [0.95, 0.96, 0.97]), 4)
        0.0036
        >>> welch_t_test([0.9], [0.8, 0.7])
        nan
    """
    x, y = _floats(a, "a"), _floats(b, "b")
    if _undefined(x, y):
        return float("nan")
    if max(x) == min(x) and max(y) == min(y):
        return 1.0 if x[0] == y[0] else 0.0
    from scipy import stats as scipy_stats  # imported on use: scipy.stats takes ~1 s to import

    return float(scipy_stats.ttest_ind(x, y, equal_var=False).pvalue)


def one_sample_t_test(values: Sequence[float], value: float) -> float:
    """Two-sided p-value of the one-sample t-test of ``values``' mean against the fixed ``value``: the test against
    a deterministic reference (one value without seed variance, such as a non-neural baseline).

    NaN with fewer than two values or a non-finite one; with zero variance, 1.0 if the mean equals ``value``, else
    0.0 (the statistic's limit).

    Example:
        >>> round(one_sample_t_test([12.1, 12.4, 12.3], 11.0), 4), one_sample_t_test([3.0], 1.0)
        (0.0048, nan)
    """
    x = _floats(values, "values")
    if len(x) < 2 or not all(math.isfinite(v) for v in [*x, value]):
        return float("nan")
    if max(x) == min(x):
        return 1.0 if x[0] == value else 0.0
    from scipy import stats as scipy_stats  # imported on use, as in welch_t_test

    return float(scipy_stats.ttest_1samp(x, value).pvalue)


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (does one group tend to have larger values?).

    scipy picks the exact distribution for small samples without ties and the normal approximation
    otherwise. Degenerate cases follow :func:`welch_t_test`: NaN when either group has fewer than two values
    or a non-finite value; 1.0 when every value in both groups is the same.

    Args:
        a: values of the first group.
        b: values of the second group.

    Returns:
        The p-value in ``[0, 1]``, or NaN as above.

    Example:
        >>> round(mann_whitney_u([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), 4)
        0.1
    """
    x, y = _floats(a, "a"), _floats(b, "b")
    if _undefined(x, y):
        return float("nan")
    if max(x + y) == min(x + y):
        return 1.0
    from scipy import stats as scipy_stats

    return float(scipy_stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)


def summarize_runs(metrics_list: list[dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Summarize each metric over runs (seeds) with :func:`summarize`.

    Every run must report the same metric names, so each summary's ``n`` is the number of runs.

    Args:
        metrics_list: one ``{metric: value}`` mapping per run, e.g. each seed's ``metrics.json``.

    Returns:
        ``{metric: summarize(values)}`` in the first run's key order.

    Example:
        >>> summarize_runs([{"hit@10": 0.5}, {"hit@10": 0.7}])["hit@10"]["max"]
        0.7
    """
    if not metrics_list:
        raise EmbregError("summarize_runs needs at least one run's metrics, got an empty list")
    names = list(metrics_list[0])
    for index, metrics in enumerate(metrics_list[1:], start=1):
        if set(metrics) != set(names):
            missing = sorted(set(names) - set(metrics))
            extra = sorted(set(metrics) - set(names))
            raise EmbregError(f"run {index} reports different metrics from run 0: missing {missing}, extra {extra}")
    return {name: summarize([m[name] for m in metrics_list]) for name in names}


def median_interval(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median of ``values`` (fixed seed: reproducible).

    Args:
        values: repeated measurements (e.g. per-round step-time ratios); at least one, all finite.
        confidence: the interval's coverage, in (0, 1).
        resamples: bootstrap resamples.
        seed: seed of the resampling.

    Returns:
        ``(low, high)``; a single value gives ``(value, value)``.

    Example:
        >>> low, high = median_interval([1.5, 1.6, 1.7, 1.8, 1.9])
        >>> 1.5 <= low <= 1.7 <= high <= 1.9
        True
    """
    x = _floats(values, "values")
    if not x:
        raise EmbregError("values is empty; median_interval needs at least one value")
    if not all(math.isfinite(v) for v in x):
        raise EmbregError(f"values must be finite, got {x}")
    if not 0.0 < confidence < 1.0:
        raise EmbregError(f"confidence={confidence} is outside the valid range (0, 1)")
    if len(x) == 1 or max(x) == min(x):
        return x[0], x[0]
    from scipy import stats as scipy_stats

    result = scipy_stats.bootstrap(
        (x,),
        statistics.median,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=False,
        random_state=seed,
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def target_verdict(low: float, high: float, target: float | None) -> str:
    """Whether an interval ``[low, high]`` of a cost ratio meets an upper-bound ``target``.

    ``"met"`` when the whole interval is at or under the target, ``"missed"`` when all of it is above, ``"at
    limit"`` when it contains the target, ``"—"`` without a target.

    Example:
        >>> target_verdict(1.5, 1.65, 1.7), target_verdict(1.6, 1.8, 1.7), target_verdict(1.75, 1.9, 1.7)
        ('met', 'at limit', 'missed')
    """
    if low > high:
        raise EmbregError(f"low={low} is above high={high}; an interval needs low <= high")
    if target is None:
        return "—"
    return "met" if high <= target else ("missed" if low > target else "at limit")

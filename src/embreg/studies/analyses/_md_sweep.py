"""What the mixed-dimension analyses share: a study's final runs grouped by (budget, alpha) and the alpha each
budget chooses on validation (mixed-dimension-embeddings.txt, Sec. V: budgets x temperatures).

A mixed-dimension study has the row budget ``embeddings.budget`` as a grid axis and one variant per temperature
(``embeddings.alpha`` in the variant's overrides; ``alpha = 0`` is the uniform table). Every reading is of a loss
(MSE, log-loss): lower is better.

Example:
    >>> from embreg.studies.runlog import RunRecord
    >>> runs = [RunRecord("s", v, {"embeddings.budget": 10}, "final", {}, seed, [f"embeddings.alpha={a}"], "r",
    ...                   {"test_mse": t + seed / 100, "val_mse": t, "embedding_parameters": 10})
    ...         for v, a, t in (("uniform", 0.0, 0.9), ("MD alpha 0.3", 0.3, 0.8)) for seed in (0, 1)]
    >>> [(p.alpha, round(p.mean("test_mse"), 3)) for p in sweep_points(runs)]
    [(0.0, 0.905), (0.3, 0.805)]
    >>> chosen_on_validation(sweep_points(runs), "mse")[0].alpha
    0.3
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from embreg.analysis.stats import summarize, welch_t_test

BUDGET = "embeddings.budget"


def alpha_of(record: Any) -> float:
    """The temperature a run used: its last ``embeddings.alpha=`` override (0 without one: a uniform table)."""
    values = [o.split("=", 1)[1] for o in record.overrides if o.startswith("embeddings.alpha=")]
    return float(values[-1]) if values else 0.0


@dataclass
class SweepPoint:
    """The final runs of one (budget, alpha) point of a sweep."""

    budget: float
    alpha: float
    variant: str
    records: list[Any] = field(default_factory=list)

    def values(self, metric: str) -> list[float]:
        return [r.metrics[metric] for r in self.records]

    def mean(self, metric: str) -> float:
        return summarize(self.values(metric))["mean"]

    def std(self, metric: str) -> float:
        return summarize(self.values(metric))["std"]

    def text(self, metric: str, digits: int = 4) -> str:
        """``mean ± std`` of ``metric`` over the seeds."""
        return f"{self.mean(metric):.{digits}f} ± {self.std(metric):.{digits}f}"

    @property
    def setting(self) -> str:
        """The tuned setting of the point's runs (``key=value``), empty when nothing was tuned."""
        setting = self.records[0].setting
        return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in setting.items())


def sweep_points(records: list[Any]) -> list[SweepPoint]:
    """The final runs by (budget, alpha), sorted by budget then alpha (records of other phases are ignored)."""
    points: dict[tuple[float, float], SweepPoint] = {}
    for record in records:
        if record.phase != "final":
            continue
        budget, alpha = float(record.point[BUDGET]), alpha_of(record)
        points.setdefault((budget, alpha), SweepPoint(budget, alpha, record.variant)).records.append(record)
    return [points[k] for k in sorted(points)]


def chosen_on_validation(points: list[SweepPoint], metric: str) -> list[SweepPoint]:
    """At each budget with MD points, the MD point (alpha > 0) with the lowest mean ``val_<metric>``."""
    budgets = sorted({p.budget for p in points if p.alpha > 0})
    return [
        min((p for p in points if p.alpha > 0 and p.budget == b), key=lambda p: p.mean(f"val_{metric}"))
        for b in budgets
    ]


def advantage_in_se(baseline: SweepPoint, other: SweepPoint, metric: str) -> float:
    """How far ``other``'s mean test ``metric`` is below ``baseline``'s, in standard errors of the difference:
    ``(mean_b - mean_o) / sqrt(std_b^2 / n_b + std_o^2 / n_o)`` (positive: ``other`` is better); NaN with fewer
    than two seeds on either side or no spread at all.

    Example:
        >>> from types import SimpleNamespace as R
        >>> a = SweepPoint(1, 0, "u", [R(metrics={"test_mse": v}) for v in (0.9, 0.92)])
        >>> b = SweepPoint(1, 0.3, "m", [R(metrics={"test_mse": v}) for v in (0.8, 0.82)])
        >>> round(advantage_in_se(a, b, "mse"), 2)
        7.07
    """
    test = f"test_{metric}"
    x, y = summarize(baseline.values(test)), summarize(other.values(test))
    if x["n"] < 2 or y["n"] < 2:
        return float("nan")
    se = math.sqrt(x["std"] ** 2 / x["n"] + y["std"] ** 2 / y["n"])
    return (x["mean"] - y["mean"]) / se if se > 0 else float("nan")


def welch_p(baseline: SweepPoint, other: SweepPoint, metric: str) -> float:
    """Two-sided Welch p-value of the two points' test ``metric`` over seeds."""
    return welch_t_test(baseline.values(f"test_{metric}"), other.values(f"test_{metric}"))


def per_row(point: SweepPoint, rows: int | None) -> str:
    """The budget as parameters per row (``"4 per row"``) when the study names its row count, else the budget."""
    return f"{point.budget / rows:g} per row" if rows else f"{point.budget:.0f}"


def signed(value: float) -> str:
    return "" if math.isnan(value) else f"{value:+.1f}"

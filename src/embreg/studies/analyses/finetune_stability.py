"""Stability over seeds of a fine-tuning study (lnsr-noise-stability-bert.txt, Tables 1 and 3, Sec. 4.4, Fig. 2).

Per metric, one row per variant: seeds, mean, std, median, max, min, the mean generalisation gap (train minus
evaluation score, the run's ``gap_<name>`` metric) and three p-values against the baseline: Welch's t-test and
Mann-Whitney U for the level (:mod:`embreg.analysis.stats`), Brown-Forsythe (Levene's test about the median) for the
spread. Then the paper's Table-1 direction (the method's mean at least the baseline's and its std at most the
baseline's) on the seeds both share, and a box plot of the per-seed values. Reads the study's final runs only.

Example:
    >>> from embreg.studies.runlog import RunRecord
    >>> runs = [RunRecord("s", v, {}, "final", {}, s, [], "r", {"test_mcc": x})
    ...         for v, xs in (("FT", [0.5, 0.6, 0.7]), ("LNSR", [0.6, 0.6, 0.7])) for s, x in enumerate(xs)]
    >>> direction_row(by_variant(runs), "test_mcc", "FT", "LNSR").verdict
    'holds'
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embreg.analysis.stability import box_plot_values, gap_metric
from embreg.analysis.stats import mann_whitney_u, summarize, welch_t_test
from embreg.registry import register
from embreg.studies.sections import AnalysisContext, ClaimRow, Section

__all__ = [
    "FinetuneStabilityConfig",
    "by_variant",
    "brown_forsythe",
    "stability_table",
    "direction_row",
    "DirectionRow",
    "build",
]


@dataclass
class FinetuneStabilityConfig:
    """Arguments of the ``finetune-stability`` analysis.

    Attributes:
        metrics: the evaluation metrics that get a comparison table.
        check_metrics: the metrics of the Table-1 direction check (method against baseline on shared seeds).
        baseline: the variant every p-value tests against (``null``: the study's baseline).
        method: the variant of the direction check (``null``: the study's last variant).
        box_metric: the metric of the box plot (``null``: no plot).
    """

    metrics: list[str] = field(default_factory=lambda: ["test_accuracy", "test_mcc"])
    check_metrics: list[str] = field(default_factory=list)
    baseline: str | None = None
    method: str | None = None
    box_metric: str | None = "test_mcc"


def by_variant(records: list[Any], order: list[str] | None = None) -> dict[str, dict[int, dict[str, Any]]]:
    """``{variant: {seed: metrics}}`` of final records (the study's variant order first, seeds ascending)."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for label in order or []:
        out[label] = {}
    for record in records:
        if record.phase == "final":
            out.setdefault(record.variant, {})[record.seed] = record.metrics
    return {label: dict(sorted(seeds.items())) for label, seeds in out.items()}


def brown_forsythe(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the Brown-Forsythe test of equal spread (NaN with fewer than 2 values a side or no spread)."""
    if len(a) < 2 or len(b) < 2 or (max(a) == min(a) and max(b) == min(b)):
        return float("nan")
    from scipy import stats as scipy_stats  # imported on use: scipy.stats takes ~1 s to import

    return float(scipy_stats.levene(a, b, center="median").pvalue)


def _p(value: float) -> str:
    return "n/a" if math.isnan(value) else ("<0.001" if value < 0.001 else f"{value:.3f}")


def _values(seeds: dict[int, dict[str, Any]], metric: str) -> list[float]:
    return [float(m[metric]) for m in seeds.values() if metric in m]


def stability_table(runs: dict[str, dict[int, dict[str, Any]]], metric: str, baseline: str) -> str:
    """The comparison table of ``metric`` (markdown), p-values against ``baseline``."""
    gap = gap_metric(metric)
    base = _values(runs.get(baseline, {}), metric)
    lines = [
        "| method | seeds | mean | std | median | max | min | gap (train − test) | p Welch | p Mann-Whitney "
        "| p Brown-Forsythe (spread) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, seeds in runs.items():
        values = _values(seeds, metric)
        if not values:
            lines.append(f"| {label} | 0 | — | — | — | — | — | — | — | — | — |")
            continue
        s = summarize(values)
        gaps = _values(seeds, gap)
        gap_cell = f"{statistics.fmean(gaps):.4f}" if gaps else "—"
        tests = (
            ["(baseline)"] * 3
            if label == baseline
            else [_p(welch_t_test(values, base)), _p(mann_whitney_u(values, base)), _p(brown_forsythe(values, base))]
        )
        lines.append(
            f"| {label} | {s['n']} | {s['mean']:.4f} | {s['std']:.4f} | {s['median']:.4f} | {s['max']:.4f} | "
            f"{s['min']:.4f} | {gap_cell} | " + " | ".join(tests) + " |"
        )
    return "\n".join(lines) + "\n"


@dataclass
class DirectionRow:
    """The Table-1 direction check of one metric on the seeds method and baseline share."""

    metric: str
    seeds: list[int]
    mean: tuple[float, float]
    std: tuple[float, float]
    p_welch: float
    p_mann_whitney: float
    p_brown_forsythe: float
    verdict: str

    def markdown(self) -> str:
        if len(self.seeds) < 2:
            return f"| {self.metric} | {len(self.seeds)} | — | — | — | — | too few shared seeds |"
        return (
            f"| {self.metric} | {len(self.seeds)} (seeds {self.seeds[0]}–{self.seeds[-1]}) | {self.mean[0]:.4f} vs "
            f"{self.mean[1]:.4f} | {self.std[0]:.4f} vs {self.std[1]:.4f} | {_p(self.p_welch)} / "
            f"{_p(self.p_mann_whitney)} | {_p(self.p_brown_forsythe)} | {self.verdict} |"
        )


def direction_row(runs: dict[str, dict[int, dict[str, Any]]], metric: str, baseline: str, method: str) -> DirectionRow:
    """Method mean >= baseline mean and method std <= baseline std, on the seeds both have ``metric`` for."""
    shared = sorted(
        s
        for s in set(runs.get(baseline, {})) & set(runs.get(method, {}))
        if metric in runs[baseline][s] and metric in runs[method][s]
    )
    nan = float("nan")
    if len(shared) < 2:
        return DirectionRow(metric, shared, (nan, nan), (nan, nan), nan, nan, nan, "too few shared seeds")
    base = [float(runs[baseline][s][metric]) for s in shared]
    ours = [float(runs[method][s][metric]) for s in shared]
    a, b = summarize(ours), summarize(base)
    if metric.endswith(("loss", "rmse", "mae", "ppl")):
        mean_ok = a["mean"] <= b["mean"]
    else:
        mean_ok = a["mean"] >= b["mean"]
    std_ok = a["std"] <= b["std"]
    verdict = (
        "holds" if mean_ok and std_ok else ("mean only" if mean_ok else ("std only" if std_ok else "does not hold"))
    )
    return DirectionRow(
        metric,
        shared,
        (a["mean"], b["mean"]),
        (a["std"], b["std"]),
        welch_t_test(ours, base),
        mann_whitney_u(ours, base),
        brown_forsythe(ours, base),
        verdict,
    )


def box_plot(runs: dict[str, dict[int, dict[str, Any]]], metric: str, path: Path, title: str = "") -> None:
    """Box plot of each variant's per-seed values, with the seeds as dots."""
    box_plot_values({label: _values(runs[label], metric) for label in runs}, metric, path, title=title)


@register(
    "analysis",
    "finetune-stability",
    config=FinetuneStabilityConfig,
    summary="stability over seeds: mean/std/median/max/min, generalisation gap, Welch / Mann-Whitney / "
    "Brown-Forsythe p-values, the Table-1 direction check and a box plot",
    reference="lnsr-noise-stability-bert.txt, Tables 1 and 3, Sec. 4.4, Fig. 2",
)
def build(config: FinetuneStabilityConfig, context: AnalysisContext) -> Section:
    spec = context.spec
    baseline = config.baseline or spec.baseline
    method = config.method or list(spec.variants)[-1]
    runs = by_variant(context.final(), list(spec.variants))
    parts = [
        f"p-values compare each variant's per-seed values with {baseline}'s: Welch's t-test and Mann-Whitney U "
        "for the level, Brown-Forsythe for the spread. The gap column is the mean of train minus test score "
        "(Table 3).",
        "",
    ]
    for metric in config.metrics:
        parts += [f"**{metric}**", "", stability_table(runs, metric, baseline)]
    claims = []
    if config.check_metrics:
        parts += [
            f"Table-1 direction ({method} mean at least {baseline}'s and {method} std at most {baseline}'s), on "
            "the seeds both finished:",
            "",
            f"| metric | shared seeds | mean {method} vs {baseline} | std {method} vs {baseline} | "
            "p Welch / Mann-Whitney | p Brown-Forsythe | direction |",
            "|---|---|---|---|---|---|---|",
        ]
        for metric in config.check_metrics:
            row = direction_row(runs, metric, baseline, method)
            parts.append(row.markdown())
            if metric.startswith("test_") and len(row.seeds) >= 2:
                lower = row.std[0] <= row.std[1]
                significant = not math.isnan(row.p_brown_forsythe) and row.p_brown_forsythe < 0.05
                verdict = "reproduced" if lower and significant else ("partly" if lower else "not reproduced")
                claims.append(
                    ClaimRow(
                        f"{method} lowers the seed-to-seed spread of {metric} against {baseline} (Table 1, std row)",
                        f"std {row.std[0]:.4f} vs {row.std[1]:.4f} over {len(row.seeds)} shared seeds, Brown-Forsythe "
                        f"p = {_p(row.p_brown_forsythe)}",
                        verdict,
                        row.p_brown_forsythe,
                    )
                )
        parts.append("")
    figures = []
    if config.box_metric:
        name = f"{spec.name}-box-{config.box_metric}.png"
        box_plot(runs, config.box_metric, Path(context.out_dir) / name, title=f"{spec.title}: {config.box_metric}")
        parts.append(f"![{config.box_metric} per seed]({name})")
        figures.append(name)
    return Section("Stability over seeds", "\n".join(parts).rstrip() + "\n", figures=figures, claims=claims)

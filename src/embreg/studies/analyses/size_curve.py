"""Scores against one grid axis (e.g. the training-set size), one line per variant (lnsr-noise-stability-bert.txt,
Fig. 4): mean ± std (seeds) per axis value, the difference of each variant's mean to the baseline's, and a plot.

Example:
    >>> from embreg.studies.runlog import RunRecord
    >>> runs = [RunRecord("s", v, {"data.train_size": n}, "final", {}, s, [], "r", {"test_mcc": x + s / 10})
    ...         for v, x in (("FT", 0.5), ("LNSR", 0.6)) for n in (250, 500) for s in (0, 1)]
    >>> [round(x, 4) for x in curve_points(runs, "data.train_size", "test_mcc")["LNSR"][500]]
    [0.65, 0.0707, 2]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embreg.analysis.stability import curve_plot
from embreg.analysis.stats import summarize
from embreg.registry import register
from embreg.studies.sections import AnalysisContext, Section

__all__ = ["SizeCurveConfig", "curve_points", "build"]


@dataclass
class SizeCurveConfig:
    """Arguments of the ``size-curve`` analysis: the grid ``axis``, the ``metric`` and the ``baseline`` variant."""

    axis: str = "data.train_size"
    metric: str = "test_mcc"
    baseline: str | None = None


def curve_points(records: list[Any], axis: str, metric: str) -> dict[str, dict[Any, tuple[float, float, int]]]:
    """``{variant: {axis value: (mean, std, seeds)}}`` of the final runs that have ``metric`` and ``axis``."""
    values: dict[str, dict[Any, list[float]]] = {}
    for record in records:
        if record.phase != "final" or axis not in record.point or metric not in record.metrics:
            continue
        values.setdefault(record.variant, {}).setdefault(record.point[axis], []).append(float(record.metrics[metric]))
    out: dict[str, dict[Any, tuple[float, float, int]]] = {}
    for variant, by_value in values.items():
        out[variant] = {}
        for value in sorted(by_value):
            s = summarize(by_value[value])
            out[variant][value] = (s["mean"], s["std"], s["n"])
    return out


def plot_curve(
    points: dict[str, dict[Any, tuple[float, float, int]]], axis: str, metric: str, path: Path, title: str = ""
) -> None:
    curve_plot(points, axis, metric, path, title=title)


@register(
    "analysis",
    "size-curve",
    config=SizeCurveConfig,
    summary="mean ± std of a metric against one grid axis (e.g. training-set size), one line per variant",
    reference="lnsr-noise-stability-bert.txt, Fig. 4",
)
def build(config: SizeCurveConfig, context: AnalysisContext) -> Section:
    spec = context.spec
    baseline = config.baseline or spec.baseline
    points = curve_points(context.final(), config.axis, config.metric)
    order = [v for v in spec.variants if v in points]
    axis_values = list(spec.grid.get(config.axis) or sorted({x for p in points.values() for x in p}))
    lines = [
        f"{config.metric}, mean ± std (seeds) per `{config.axis}`; — : no finished run yet:",
        "",
        "| variant | " + " | ".join(str(x) for x in axis_values) + " |",
        "|---|" + "---:|" * len(axis_values),
    ]
    for variant in order:
        cells = [
            f"{points[variant][x][0]:.4f} ± {points[variant][x][1]:.4f} ({points[variant][x][2]})"
            if x in points[variant]
            else "—"
            for x in axis_values
        ]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    lines.append("")
    for variant in order:
        if variant == baseline or baseline not in points:
            continue
        diffs = [
            f"{x}: {points[variant][x][0] - points[baseline][x][0]:+.4f}"
            for x in axis_values
            if x in points[variant] and x in points[baseline]
        ]
        lines.append(f"{variant} minus {baseline}, mean {config.metric}: " + "; ".join(diffs) + ".")
    name = f"{spec.name}-{config.metric}.png"
    plot_curve(
        {v: points[v] for v in order},
        config.axis,
        config.metric,
        Path(context.out_dir) / name,
        title=spec.title if len(spec.title) < 70 else "",
    )
    lines += ["", f"![{config.metric} against {config.axis}]({name})"]
    return Section(f"{config.metric} against {config.axis}", "\n".join(lines) + "\n", figures=[name])

"""Stability over seeds: mean, std, median, max, generalisation gap and p-values per run, and box plots.

lnsr-noise-stability-bert.txt reports each method over 25 seeds as mean / std / max (Table 1), the generalisation
gap train minus evaluation score (Table 3), p-values against plain fine-tuning (Sec. 4.4) and box plots (Fig. 2).
:func:`stability_markdown` makes that table from multi-seed run directories (read with
:func:`embreg.analysis.compare.compare_runs`, whose Welch and Mann-Whitney tests it reuses); :func:`box_plot` draws
the per-seed values; :func:`size_curve` plots mean ± std against training-set size (Fig. 4). ``embreg compare
--full`` and ``--boxplot`` call the first two.

Example:
    >>> import tempfile, json, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     for name, values in (("ft", [0.80, 0.84, 0.70]), ("lnsr", [0.83, 0.85, 0.84])):
    ...         run = pathlib.Path(d, name); run.mkdir()
    ...         summary = {"test_accuracy": {"values": values}, "gap_accuracy": {"values": [0.1, 0.1, 0.1]}}
    ...         _ = (run / "summary.json").write_text(json.dumps(summary))
    ...     table = stability_markdown([pathlib.Path(d, "ft"), pathlib.Path(d, "lnsr")], "test_accuracy")
    >>> table.splitlines()[2].split(" | ")[1:5]
    ['0.7800', '0.0721', '0.8000', '0.8400']
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embreg.analysis.compare import compare_runs
from embreg.errors import ConfigError

__all__ = ["stability_markdown", "box_plot", "gap_metric", "size_curve"]


def gap_metric(metric: str) -> str:
    """The generalisation-gap key of an evaluation metric: ``test_accuracy`` -> ``gap_accuracy``."""
    return "gap_" + metric.split("_", 1)[1] if "_" in metric else f"gap_{metric}"


def _p(value: float) -> str:
    return "n/a" if math.isnan(value) else ("<0.001" if value < 0.001 else f"{value:.3f}")


def stability_markdown(
    run_dirs: Sequence[Path | str],
    metric: str,
    *,
    baseline: int = 0,
    digits: int = 4,
    names: Sequence[str] | None = None,
) -> str:
    """A markdown table: one row per run with mean, std, median, max, min, mean gap, p-values and seeds.

    Args:
        run_dirs: multi-seed run directories (``summary.json``) or single runs (``metrics.json``).
        metric: the evaluation metric, e.g. ``test_accuracy``; the gap column reads ``gap_<name>`` when present.
        baseline: index of the run the p-values test against (plain fine-tuning).
        digits: decimals.
        names: row labels (default: the directory names).

    Returns:
        The table, ending in a newline.
    """
    gap = gap_metric(metric)
    result = compare_runs(run_dirs, baseline=baseline, metrics=[metric])
    gaps = {}
    for row in result.rows:
        try:
            gaps[row.name] = compare_runs([row.path], metrics=[gap]).rows[0].metrics.get(gap)
        except ConfigError:
            gaps[row.name] = None
    labels = list(names) if names is not None else [row.name for row in result.rows]
    if len(labels) != len(result.rows):
        raise ConfigError(f"names has {len(labels)} entries for {len(result.rows)} run directories")
    lines = [
        f"| run | mean | std | median | max | min | gap ({gap}) | p Welch | p Mann-Whitney | seeds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    f = f"{{:.{digits}f}}"
    for index, (label, row) in enumerate(zip(labels, result.rows)):
        summary = row.metrics.get(metric)
        if summary is None:
            lines.append(f"| {label} | — | — | — | — | — | — | — | — | 0 |")
            continue
        values = summary.values
        gap_summary = gaps[row.name]
        gap_cell = f.format(gap_summary.mean) if gap_summary is not None else "—"
        if index == result.baseline:
            tests = ["(baseline)", "(baseline)"]
        else:
            p = row.p_values[metric]
            tests = [_p(p.welch), _p(p.mann_whitney)]
        lines.append(
            f"| {label} | {f.format(summary.mean)} | {f.format(summary.std)} | "
            f"{f.format(statistics.median(values))} | {f.format(max(values))} | {f.format(min(values))} | "
            f"{gap_cell} | {tests[0]} | {tests[1]} | {summary.n} |"
        )
    return "\n".join(lines) + "\n"


def box_plot(
    run_dirs: Sequence[Path | str],
    metric: str,
    path: str | Path,
    *,
    names: Sequence[str] | None = None,
    title: str = "",
) -> None:
    """Box plot of each run's per-seed values of ``metric`` (with the seeds as dots), written to ``path``."""
    result = compare_runs(run_dirs, metrics=[metric])
    labels = list(names) if names is not None else [row.name for row in result.rows]
    data = [list(row.metrics[metric].values) if metric in row.metrics else [] for row in result.rows]
    box_plot_values(dict(zip(labels, data)), metric, path, title=title)


def box_plot_values(values: dict[str, Sequence[float]], metric: str, path: str | Path, *, title: str = "") -> None:
    """Box plot of per-seed values, one box per label (the seeds as dots), written to ``path`` (PNG).

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     box_plot_values({"FT": [0.6, 0.62], "LNSR": [0.57, 0.58]}, "test_mcc", pathlib.Path(d) / "b.png")
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, data = list(values), [list(v) for v in values.values()]
    fig, ax = plt.subplots(figsize=(1.1 * len(labels) + 2, 3.6))
    ax.boxplot(data, showmeans=True)
    ax.set_xticks(range(1, len(labels) + 1), labels)
    for position, seeds in enumerate(data, 1):
        ax.scatter([position] * len(seeds), seeds, s=10, alpha=0.6, color="tab:blue", zorder=3)
    ax.set_ylabel(metric)
    ax.grid(axis="y", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def curve_plot(
    points: dict[str, dict[Any, tuple[float, float, int]]],
    xlabel: str,
    metric: str,
    path: str | Path,
    *,
    title: str = "",
) -> None:
    """Mean ± std (error bars) of ``metric`` against an axis, one line per label; a log x-axis when every x > 0.

    Args:
        points: ``{label: {x: (mean, std, n)}}``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6))
    for label, by_x in points.items():
        xs = sorted(by_x)
        ax.errorbar(xs, [by_x[x][0] for x in xs], yerr=[by_x[x][1] for x in xs], marker="o", capsize=3, label=label)
    if all(isinstance(x, (int, float)) and x > 0 for by_x in points.values() for x in by_x):
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def size_curve(
    runs: dict[str, dict[int, Path | str]], metric: str, path: str | Path, *, title: str = ""
) -> dict[str, dict[int, tuple[float, float, int]]]:
    """Mean ± std of ``metric`` against training-set size, one line per method (paper Fig. 4).

    Args:
        runs: ``{method: {train_size: run directory}}`` (multi-seed directories, e.g. made with
            ``--set data.train_size=250``).
        metric: e.g. ``test_accuracy``.
        path: the PNG to write.
        title: figure title.

    Returns:
        ``{method: {train_size: (mean, std, seeds)}}``, the plotted numbers.
    """
    points: dict[str, dict[int, tuple[float, float, int]]] = {}
    for method, by_size in runs.items():
        sizes = sorted(by_size)
        rows = compare_runs([by_size[s] for s in sizes], metrics=[metric]).rows
        points[method] = {
            s: (r.metrics[metric].mean, r.metrics[metric].std, r.metrics[metric].n) for s, r in zip(sizes, rows)
        }
    curve_plot(points, "training examples", metric, path, title=title)
    return points

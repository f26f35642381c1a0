"""Learning curves of a study's per-epoch metric (dropout-explicit-implicit-regularization.txt, Figs. 1-5, on
perplexity; sse-stochastic-shared-embeddings.txt, Fig. 4, on RMSE): per run the epochs run, the best epoch, the
best validation value and the test value of that epoch; the metric at fixed epochs; with several seeds, the best
value per seed and its mean; one plot panel per paper figure. Reads the per-epoch values a run record keeps in ``metrics["history"]`` (``{"val_ppl": [...],
"seconds": [...]}``, one entry per epoch).

Example:
    >>> from embreg.studies.runlog import RunRecord
    >>> r = RunRecord("s", "none", {}, "final", {}, 0, [], "lm-none",
    ...               {"val_ppl": 190.0, "test_ppl": 130.0, "best_epoch": 1,
    ...                "history": {"val_ppl": [250.0, 190.0, 210.0], "seconds": [10.0, 12.0, 30.0]}})
    >>> curve(r, "val_ppl"), value_at(r, "val_ppl", 3), value_at(r, "val_ppl", 4), median_seconds(r)
    ([250.0, 190.0, 210.0], 210.0, None, 12.0)
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embreg.analysis.stats import summarize
from embreg.registry import register
from embreg.studies.sections import AnalysisContext, Section

__all__ = ["LMCurvesConfig", "curve", "value_at", "median_seconds", "build"]


@dataclass
class LMCurvesConfig:
    """Arguments of the ``lm-learning-curves`` analysis.

    Attributes:
        metric: the per-epoch history entry plotted and tabulated (``val_ppl``).
        panels: panel title -> the variants it shows (one panel per paper figure; empty: one panel of all).
        epochs: the 1-based epochs of the fixed-epoch table.
        digits: decimals of the metric in the tables (perplexities: 1; RMSE: 4).
    """

    metric: str = "val_ppl"
    panels: dict[str, list[str]] = field(default_factory=dict)
    epochs: list[int] = field(default_factory=lambda: [1, 4, 8, 16])
    digits: int = 1


def curve(record: Any, metric: str) -> list[float]:
    """The per-epoch values of ``metric`` a run kept (empty without a history)."""
    return [float(v) for v in (record.metrics.get("history") or {}).get(metric, [])]


def value_at(record: Any, metric: str, epoch: int) -> float | None:
    """``metric`` after the 1-based ``epoch`` (``None`` when the run had stopped before it)."""
    values = curve(record, metric)
    return values[epoch - 1] if 1 <= epoch <= len(values) else None


def median_seconds(record: Any) -> float | None:
    seconds = curve(record, "seconds")
    return statistics.median(seconds) if seconds else None


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _plot(panels: dict[str, list[str]], runs: dict[tuple[str, int], Any], metric: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), sharey=True, squeeze=False)
    cmap = plt.get_cmap("tab20")
    palette = [cmap(i) for i in range(cmap.N)]
    labels = list(dict.fromkeys(v for v, _ in runs))
    colours = {label: palette[i % len(palette)] for i, label in enumerate(labels)}
    for ax, (title, variants) in zip(axes[0], panels.items()):
        for (variant, seed), record in runs.items():
            if variant not in variants:
                continue
            values = curve(record, metric)
            ax.plot(
                range(1, len(values) + 1),
                values,
                marker="o",
                markersize=3,
                color=colours[variant],
                linestyle="-" if seed == min(s for v, s in runs if v == variant) else "--",
                label=variant if seed == min(s for v, s in runs if v == variant) else None,
            )
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel(metric)
    axes[0][0].set_ylim(top=min(800, axes[0][0].get_ylim()[1]))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@register(
    "analysis",
    "lm-learning-curves",
    config=LMCurvesConfig,
    summary="per-run best epoch, best validation and test perplexity, values at fixed epochs, best value "
    "per seed, and validation curves with one panel per paper figure",
    reference="dropout-explicit-implicit-regularization.txt, Figs. 1-5",
)
def build(config: LMCurvesConfig, context: AnalysisContext) -> Section:
    spec = context.spec
    final = context.final()
    order = {label: i for i, label in enumerate(spec.variants)}
    final.sort(key=lambda r: (order.get(r.variant, len(order)), r.seed))
    runs = {(r.variant, r.seed): r for r in final}
    seeds = sorted({r.seed for r in final})
    d = config.digits
    best = "val_" + config.metric.split("_", 1)[1] if "_" in config.metric else config.metric
    test = "test_" + config.metric.split("_", 1)[1] if "_" in config.metric else config.metric
    lines = [
        "Per run (best epoch counted from 1; seconds per epoch are medians over the run's epochs and mostly say "
        "how much CPU the run got):",
        "",
        f"| run | seed | epochs run | best epoch | best {best} | {test} (best epoch) | s / epoch (median) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (variant, seed), r in runs.items():
        m = r.metrics
        best_epoch = m.get("best_epoch")
        lines.append(
            f"| {variant} | {seed} | {m.get('epochs_run', len(curve(r, config.metric)))} | "
            f"{'-' if best_epoch is None else int(best_epoch) + 1} | {_fmt(m.get(best), d)} | "
            f"{_fmt(m.get(test), d)} | {_fmt(median_seconds(r), 1)} |"
        )
    lines += [
        "",
        f"{config.metric} at fixed epochs (`-`: the run had stopped):",
        "",
        "| run | seed | " + " | ".join(f"epoch {e}" for e in config.epochs) + " | best |",
        "|---|---:|" + "---:|" * (len(config.epochs) + 1),
    ]
    for (variant, seed), r in runs.items():
        values = curve(r, config.metric)
        if not values:
            continue
        low = min(values)
        cells = [_fmt(value_at(r, config.metric, e), d) for e in config.epochs]
        lines.append(f"| {variant} | {seed} | " + " | ".join(cells) + f" | {low:.{d}f} ({values.index(low) + 1}) |")
    if len(seeds) > 1:
        lines += [
            "",
            f"Best {best} per seed and the mean over seeds:",
            "",
            "| run | "
            + " | ".join(f"seed {s}" for s in seeds)
            + " | mean | "
            + " / ".join(f"{test} seed {s}" for s in seeds)
            + " |",
            "|---|" + "---:|" * (len(seeds) + 2),
        ]
        for variant in dict.fromkeys(v for v, _ in runs):
            vals = [runs[(variant, s)].metrics.get(best) if (variant, s) in runs else None for s in seeds]
            tests = [runs[(variant, s)].metrics.get(test) if (variant, s) in runs else None for s in seeds]
            present = [v for v in vals if v is not None]
            mean = summarize(present)["mean"] if present else None
            lines.append(
                f"| {variant} | "
                + " | ".join(_fmt(v, d) for v in vals)
                + f" | **{_fmt(mean, d)}** | "
                + " / ".join(_fmt(t, d) for t in tests)
                + " |"
            )
    panels = config.panels or {spec.title: list(spec.variants)}
    name = f"{spec.name}-{config.metric}-curves.png"
    _plot(panels, runs, config.metric, Path(context.out_dir) / name)
    lines += [
        "",
        f"![{config.metric} per epoch]({name})",
        "",
        "One panel per paper figure; with two seeds, the second is dashed.",
    ]
    return Section("Learning curves", "\n".join(lines) + "\n", figures=[name])

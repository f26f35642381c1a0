"""Time to a reference: a trained variant's per-epoch validation metric against its training steps and hours, beside
the value of a reference row (a non-neural baseline such as the ``lexicon``), and when it first passes it.

Per trained variant (mean over its final seeds) and epoch: the steps trained so far, the training hours so far (the
sum of the per-epoch seconds the run records, evaluation excluded; wall clock on the study's machine, so a loaded
or paused machine shows in it, which is why the steps and the median hours per epoch are given too) and the
metric. The reference's value is the same metric of the reference variant (``val_bleu`` of a lexicon: the same
validation sources). A plot draws the metric against training hours with the reference as a horizontal line.

Reads what the study runner keeps per run: ``metrics["history"]`` (``seconds`` and the monitor per epoch),
``train_seconds`` and ``seconds_per_step`` (their ratio is the run's steps).

Example:
    >>> from embreg.studies.runlog import RunRecord
    >>> r = RunRecord("s", "T", {}, "final", {}, 0, [], "translation",
    ...               {"train_seconds": 30.0, "seconds_per_step": 0.5, "epochs_run": 3,
    ...                "history": {"val_bleu": [5.0, 9.0, 12.0], "seconds": [10.0, 10.0, 10.0]}})
    >>> epoch_rows([r], "val_bleu"), first_pass(epoch_rows([r], "val_bleu"), 8.0)
    ([(1, 20, 10.0, 5.0), (2, 40, 20.0, 9.0), (3, 60, 30.0, 12.0)], 2)
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embreg.registry import register
from embreg.studies.sections import AnalysisContext, Section

__all__ = ["TimeToReferenceConfig", "epoch_rows", "first_pass", "build"]


@dataclass
class TimeToReferenceConfig:
    """Arguments of ``time-to-reference``.

    Attributes:
        metric: the per-epoch validation metric (``val_bleu``), higher is better.
        reference: the variant whose value of ``metric`` is the line to pass (``null``: the study's baseline).
        variants: the trained variants shown (empty: every variant but the reference).
    """

    metric: str = "val_bleu"
    reference: str | None = None
    variants: list[str] = field(default_factory=list)


def _steps(record: Any) -> float | None:
    metrics = record.metrics
    seconds, per_step, epochs = metrics.get("train_seconds"), metrics.get("seconds_per_step"), metrics.get("epochs_run")
    if not seconds or not per_step or not epochs:
        return None
    return float(seconds) / float(per_step) / float(epochs)


def epoch_rows(records: list[Any], metric: str) -> list[tuple[int, int, float, float]]:
    """``(epoch, steps so far, training seconds so far, metric)`` per epoch, means over ``records`` (the seeds of one
    variant) of the epochs every one of them ran."""
    curves = [(r.metrics.get("history") or {}) for r in records]
    steps = [_steps(r) for r in records]
    length = min((len(c.get(metric, [])) for c in curves), default=0)
    rows = []
    for epoch in range(1, length + 1):
        values = [float(c[metric][epoch - 1]) for c in curves]
        seconds = [sum(float(s) for s in c.get("seconds", [])[:epoch]) for c in curves]
        done = [s * epoch for s in steps if s is not None]
        rows.append(
            (epoch, round(statistics.mean(done)) if done else 0, statistics.mean(seconds), statistics.mean(values))
        )
    return rows


def first_pass(rows: list[tuple[int, int, float, float]], reference: float) -> int | None:
    """The first epoch whose metric is above ``reference`` (``None``: none)."""
    return next((epoch for epoch, _, _, value in rows if value > reference), None)


def _plot(
    curves: dict[str, list[tuple[int, int, float, float]]], reference: float, label: str, metric: str, path: Path
):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    for variant, rows in curves.items():
        axis.plot([r[2] / 3600 for r in rows], [r[3] for r in rows], marker="o", markersize=3, label=variant)
    axis.axhline(reference, color="grey", linestyle="--", label=label)
    axis.set_xlabel("training hours (one thread; evaluation excluded)")
    axis.set_ylabel(metric)
    axis.legend(fontsize=8)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


@register(
    "analysis",
    "time-to-reference",
    config=TimeToReferenceConfig,
    summary="a trained variant's per-epoch validation metric against steps and hours, beside a reference row",
    reference="sse-stochastic-shared-embeddings.txt, Sec. 4.3 (the budget a Table 5 comparison is read at)",
)
def build(config: TimeToReferenceConfig, context: AnalysisContext) -> Section:
    spec = context.spec
    reference = config.reference or spec.baseline
    final = context.final()
    values = [float(r.metrics[config.metric]) for r in final if r.variant == reference and config.metric in r.metrics]
    variants = config.variants or [v for v in spec.variants if v != reference]
    curves = {v: epoch_rows([r for r in final if r.variant == v], config.metric) for v in variants}
    curves = {v: rows for v, rows in curves.items() if rows}
    title = f"Time to the {reference} ({config.metric})"
    if not values or not curves:
        return Section(title, f"No finished run of {reference} and of a trained variant yet.\n")
    line = statistics.mean(values)
    lines = [
        f"{config.metric} after each epoch (mean over the seeds), steps and training hours so far, against "
        f"{reference}'s {config.metric} = {line:.2f} on the same validation sources.",
        "",
    ]
    for variant, rows in curves.items():
        passed = first_pass(rows, line)
        per_epoch = statistics.median(b[2] - a[2] for a, b in zip([(0, 0, 0.0, 0.0), *rows], rows))
        verdict = (
            f"passes it after epoch {passed} ({rows[passed - 1][1]:,} steps, {rows[passed - 1][2] / 3600:.2f} h)"
            if passed is not None
            else f"does not pass it in {len(rows)} epochs"
        )
        lines += [
            f"**{variant}** {verdict}; median {per_epoch / 60:.1f} min of training per epoch.",
            "",
            f"| epoch | steps | training hours | {config.metric} |",
            "|---:|---:|---:|---:|",
            *(f"| {e} | {s:,} | {sec / 3600:.2f} | {v:.2f} |" for e, s, sec, v in rows),
            "",
        ]
    name = f"{spec.name}-time-to-reference.png"
    _plot(curves, line, reference, config.metric, Path(context.out_dir) / name)
    lines.append(f"![{config.metric} against training hours]({name})")
    return Section(title, "\n".join(lines) + "\n", figures=[name])

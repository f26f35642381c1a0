"""Time to a given validation log-loss in a mixed-dimension CTR sweep (mixed-dimension-embeddings.txt, Sec. V-A,
Fig. 2c: "MD embeddings can train > 2x faster than UD embeddings at a given test loss").

The target is the best mean validation log-loss of the uniform points plus ``slack``. Per run, the time to target
is the training seconds (sum of epoch times) until the validation log-loss first reaches it, and the train time
the seconds up to and including the best validation epoch; every final run must hold the per-epoch lists
``history`` (per-epoch ``seconds`` and ``val_logloss``, as the study runner keeps them) and ``best_epoch`` (0-based, as the trainer counts). Times are wall
clock on the study's machine: indicative only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from embreg.analysis.stats import summarize
from embreg.registry import register
from embreg.studies.analyses._md_sweep import chosen_on_validation, per_row, sweep_points
from embreg.studies.sections import AnalysisContext, ClaimRow, Section


@dataclass
class MDTimeToTargetConfig:
    """Arguments of ``md-time-to-target``.

    Attributes:
        slack: the target is the best uniform mean validation log-loss plus this.
        rows: rows of all tables together, to print budgets per row (0: print the budget).
        claim: the paper's claim, with its place.
    """

    slack: float = 0.005
    rows: int = 0
    claim: str = "MD trains > 2x faster than uniform embeddings to a given loss (Sec. V-A, Fig. 2c; the paper on a GPU)"


def _history(record: Any, key: str) -> list[float]:
    """The per-epoch values of ``key`` the run record keeps (``metrics["history"]``; empty without one)."""
    return [float(v) for v in (record.metrics.get("history") or {}).get(key, [])]


def time_to_target(record: Any, target: float) -> float | None:
    """Training seconds until the validation log-loss first reaches ``target`` (None: never).

    Example:
        >>> from types import SimpleNamespace as R
        >>> run = R(metrics={"history": {"seconds": [1.5] * 4, "val_logloss": [0.5, 0.42, 0.41, 0.45]}})
        >>> time_to_target(run, 0.42), time_to_target(run, 0.3)
        (3.0, None)
    """
    elapsed = 0.0
    for seconds, loss in zip(_history(record, "seconds"), _history(record, "val_logloss")):
        elapsed += seconds
        if loss <= target:
            return elapsed
    return None


def seconds_to_best(record: Any) -> float:
    """Training seconds up to and including the best validation epoch (the patience epochs after it left out)."""
    return sum(_history(record, "seconds")[: int(record.metrics["best_epoch"]) + 1])


def reached_text(times: list[float | None]) -> str:
    """``"k/N, median X s"``: how many seeds reached the target, and the median time of those that did.

    Example:
        >>> reached_text([None, 2.0, 4.0]), reached_text([None])
        ('2/3, median 3.0 s', '0/1')
    """
    done = [t for t in times if t is not None]
    return f"{len(done)}/{len(times)}" + (f", median {summarize(done)['median']:.1f} s" if done else "")


def _median(times: list[float | None]) -> float | None:
    done = [t for t in times if t is not None]
    return summarize(done)["median"] if done else None


@register(
    "analysis",
    "md-time-to-target",
    config=MDTimeToTargetConfig,
    summary="MD vs uniform: training time to a target validation log-loss and to the best epoch (CTR)",
    reference="mixed-dimension-embeddings.txt, Sec. V-A, Fig. 2c",
)
def build(config: MDTimeToTargetConfig, context: AnalysisContext) -> Section:
    cfg = config
    points = sweep_points(context.records)
    uniform = {p.budget: p for p in points if p.alpha == 0}
    if not uniform:
        return Section("Time to target", "No uniform (alpha 0) point in the log: no target.\n")
    target = min(p.mean("val_logloss") for p in uniform.values()) + cfg.slack
    lines = [
        f"Target: the best uniform mean validation log-loss + {cfg.slack:g} = {target:.4f}. Time to target: "
        "seeds that reached it / seeds, median training seconds of those; train time: seconds up to the best "
        "validation epoch (mean ± std). Wall clock, indicative only.",
        "",
        "| budget | uniform: time to target | uniform: train time (s) | MD alpha (chosen on val.) | "
        "MD: time to target | MD: train time (s) |",
        "|---|---|---|---|---|---|",
    ]
    ratios = []
    for md in chosen_on_validation(points, "logloss"):
        u = uniform.get(md.budget)
        if u is None:
            continue
        times = {p.alpha: [time_to_target(r, target) for r in p.records] for p in (u, md)}
        best = {p.alpha: summarize([seconds_to_best(r) for r in p.records]) for p in (u, md)}
        mu, mm = _median(times[0.0]), _median(times[md.alpha])
        ratios.append((md, None if mu is None or mm is None else mu / mm, mu, mm))
        lines.append(
            f"| {per_row(u, cfg.rows)} | {reached_text(times[0.0])} | {best[0.0]['mean']:.1f} ± "
            f"{best[0.0]['std']:.1f} | {md.alpha:g} | {reached_text(times[md.alpha])} | "
            f"{best[md.alpha]['mean']:.1f} ± {best[md.alpha]['std']:.1f} |"
        )
    known = [r for _, r, _, _ in ratios if r is not None]
    reading = "median seconds to the target, uniform / MD: " + ", ".join(
        f"{per_row(m, cfg.rows)}: {mu:.1f} / {mm:.1f} s ({r:.2f}x)" if r is not None else f"{per_row(m, cfg.rows)}: —"
        for m, r, mu, mm in ratios
    )
    if known and all(r >= 2 for r in known):
        verdict = "reproduced"
    elif any(r > 1 for r in known):
        verdict = "partly"
    else:
        verdict = "not reproduced"
    return Section("Time to a given log-loss", "\n".join(lines) + "\n", claims=[ClaimRow(cfg.claim, reading, verdict)])

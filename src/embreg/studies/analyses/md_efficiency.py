"""The parameter-efficiency reading of a mixed-dimension sweep (mixed-dimension-embeddings.txt, Sec. V, Fig. 2b
and 3a/3d): the budget curve of test loss against parameters per alpha, MD against uniform at each budget, and the
fewest parameters at which MD matches the best uniform model.

Two readings of "the smallest MD as good as the best uniform model":

* on test (the claim's wording): the uniform point with the best mean test loss, against every MD point;
* on validation: every choice made on the validation split (the uniform point with the best mean validation
  loss; at each budget the alpha with the best mean validation loss), so the test split only scores.

Claim rows: the efficiency target (``target_ratio`` of the best uniform model's parameters) and "MD beats uniform
at small budgets" (MD at the alpha chosen on validation against the uniform table of the same budget, two-sided
Welch test at 5 %).
"""

from __future__ import annotations

from dataclasses import dataclass

from embreg.registry import register
from embreg.studies.analyses._md_sweep import (
    SweepPoint,
    advantage_in_se,
    chosen_on_validation,
    per_row,
    signed,
    sweep_points,
    welch_p,
)
from embreg.studies.sections import AnalysisContext, ClaimRow, Section


@dataclass
class MDEfficiencyConfig:
    """Arguments of ``md-efficiency``.

    Attributes:
        metric: the loss read (``test_<metric>`` and ``val_<metric>`` in every final run; lower is better).
        label: its name in the text (``MSE``, ``log-loss``).
        size: the parameter count compared (``embedding_parameters`` or ``model_parameters``).
        rows: rows of all tables together, to print budgets per row (0: print the budget).
        target_ratio: the efficiency target, MD's parameters over the best uniform model's.
        efficiency_claim: the paper's claim of the efficiency target, with its place.
        budget_claim: the paper's claim that MD beats uniform at a given (small) budget, with its place.
    """

    metric: str = "mse"
    label: str = "MSE"
    size: str = "embedding_parameters"
    rows: int = 0
    target_ratio: float = 0.25
    efficiency_claim: str = (
        "MD matches the best uniform model with <= 1/4 of its parameters (abstract: "
        "'maintain it using 16x fewer parameters'; Sec. V-A, Fig. 2a/2b)"
    )
    budget_claim: str = (
        "MD beats uniform embeddings at a given budget, especially at low budgets "
        "(Sec. V-B: 'MD embeddings substantially outperform UD embeddings, especially at low "
        "parameter budgets', Fig. 3a/3d)"
    )


def _size(point: SweepPoint, size: str) -> float:
    return point.mean(size)


def _smallest_matching(
    reference: SweepPoint, candidates: list[SweepPoint], metric: str, size: str
) -> SweepPoint | None:
    test = f"test_{metric}"
    matching = [p for p in candidates if p.mean(test) <= reference.mean(test)]
    return min(matching, key=lambda p: _size(p, size)) if matching else None


def efficiency_readings(points: list[SweepPoint], metric: str, size: str) -> dict[str, dict]:
    """``{"on_test": ..., "on_validation": ...}``, each ``{"best_uniform", "smallest_md", "ratio"}`` (``None``
    where no MD point is as good); empty without a uniform point."""
    uniform = [p for p in points if p.alpha == 0]
    if not uniform:
        return {}
    md = [p for p in points if p.alpha > 0]
    out = {}
    for reading, reference, candidates in (
        ("on_test", min(uniform, key=lambda p: p.mean(f"test_{metric}")), md),
        ("on_validation", min(uniform, key=lambda p: p.mean(f"val_{metric}")), chosen_on_validation(points, metric)),
    ):
        smallest = _smallest_matching(reference, candidates, metric, size)
        out[reading] = {
            "best_uniform": reference,
            "smallest_md": smallest,
            "ratio": _size(smallest, size) / _size(reference, size) if smallest else None,
        }
    return out


def _point_text(point: SweepPoint, cfg: MDEfficiencyConfig) -> str:
    kind = "uniform" if point.alpha == 0 else f"MD alpha {point.alpha:g}"
    return (
        f"{kind} at {per_row(point, cfg.rows)}, {point.text(f'test_{cfg.metric}')} "
        f"({_size(point, cfg.size):,.0f} {cfg.size.replace('_', ' ')})"
    )


def _efficiency_claim(points: list[SweepPoint], readings: dict, cfg: MDEfficiencyConfig) -> ClaimRow:
    test = f"test_{cfg.metric}"
    reference = readings["on_test"]["best_uniform"]
    parts = [f"best uniform: {_point_text(reference, cfg)}"]
    for reading in ("on_test", "on_validation"):
        r = readings[reading]
        how = "alpha picked on test" if reading == "on_test" else "everything chosen on validation"
        parts.append(
            f"smallest MD as good ({how}): "
            + (f"{_point_text(r['smallest_md'], cfg)}, {r['ratio']:.2f}x" if r["smallest_md"] else "none")
        )
    limit = cfg.target_ratio * _size(reference, cfg.size)
    within = [p for p in points if p.alpha > 0 and _size(p, cfg.size) <= limit]
    p_value = float("nan")
    if within:
        best = min(within, key=lambda p: p.mean(test))
        behind = -advantage_in_se(reference, best, cfg.metric)
        p_value = welch_p(reference, best, cfg.metric)
        parts.append(
            f"best MD within {cfg.target_ratio:g}x its parameters: {_point_text(best, cfg)}, "
            f"{behind:+.1f} standard errors behind (Welch p = {p_value:.2g})"
        )
    else:
        parts.append(f"no MD point has <= {cfg.target_ratio:g}x its parameters")
    on_val, on_test = readings["on_validation"]["ratio"], readings["on_test"]["ratio"]
    if on_val is not None and on_val <= cfg.target_ratio:
        verdict = "reproduced"
    elif on_test is not None and on_test <= cfg.target_ratio:
        verdict = "partly"
    else:
        verdict = "not reproduced"
    return ClaimRow(cfg.efficiency_claim, "; ".join(parts), verdict, p_value)


def _budget_claim(rows: list[tuple[SweepPoint, SweepPoint, float, float]], cfg: MDEfficiencyConfig) -> ClaimRow:
    ahead = [u for u, _, se, p in rows if se > 0 and p < 0.05]
    behind = [u for u, _, se, p in rows if se < 0 and p < 0.05]
    if ahead and not behind:
        verdict = "reproduced" if len(ahead) == len(rows) else "partly"
    elif ahead:
        verdict = "partly"
    elif behind:
        verdict = "opposite"
    else:
        verdict = "not reproduced"
    test = f"test_{cfg.metric}"
    reading = "MD (alpha chosen on validation) ahead of uniform, in standard errors: " + ", ".join(
        f"{signed(se)} at {per_row(u, cfg.rows)} ({m.mean(test):.4f} vs {u.mean(test):.4f}, p = {p:.2g})"
        for u, m, se, p in rows
    )
    return ClaimRow(cfg.budget_claim, reading, verdict, rows[0][3] if rows else float("nan"))


def _plot(points: list[SweepPoint], cfg: MDEfficiencyConfig, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    test = f"test_{cfg.metric}"
    alphas = sorted({p.alpha for p in points})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for alpha, color in zip(alphas, plt.cm.viridis([i / max(1, len(alphas) - 1) * 0.9 for i in range(len(alphas))])):
        curve = sorted((p for p in points if p.alpha == alpha), key=lambda p: _size(p, cfg.size))
        ax.errorbar(
            [_size(p, cfg.size) for p in curve],
            [p.mean(test) for p in curve],
            yerr=[p.std(test) for p in curve],
            color=color,
            marker="o",
            capsize=2,
            label="uniform" if alpha == 0 else f"alpha={alpha:g}",
        )
    ax.set_xscale("log")
    ax.set_xlabel(cfg.size.replace("_", " "))
    ax.set_ylabel(f"test {cfg.label} (mean ± std over seeds)")
    ax.set_title(f"test {cfg.label} against parameters, per alpha")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@register(
    "analysis",
    "md-efficiency",
    config=MDEfficiencyConfig,
    summary="MD budget curve, MD vs uniform per budget, smallest MD matching the best uniform model",
    reference="mixed-dimension-embeddings.txt, Sec. V, Fig. 2b and 3a/3d",
)
def build(config: MDEfficiencyConfig, context: AnalysisContext) -> Section:
    cfg = config
    points = sweep_points(context.records)
    test = f"test_{cfg.metric}"
    readings = efficiency_readings(points, cfg.metric, cfg.size)
    if not readings:
        return Section("Parameter efficiency", "No uniform (alpha 0) point in the log: no efficiency reading.\n")
    uniform = {p.budget: p for p in points if p.alpha == 0}
    rows = []
    for md in chosen_on_validation(points, cfg.metric):
        if md.budget in uniform:
            u = uniform[md.budget]
            rows.append((u, md, advantage_in_se(u, md, cfg.metric), welch_p(u, md, cfg.metric)))
    lines = [
        f"Test {cfg.label}, mean ± std over seeds; MD at the alpha with the lowest mean validation {cfg.label} "
        f"at each budget; \"ahead\": uniform's mean minus MD's in standard errors of the difference (positive: "
        f"MD better), p: two-sided Welch test. Best alpha on test is an optimistic pick, shown for reference.",
        "",
        f"| budget | uniform | setting | MD, alpha chosen on val. | setting | MD ahead (SE) | p | "
        f"best alpha on test | {cfg.size.replace('_', ' ')}: MD / uniform |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for u, md, se, p in rows:
        top = min((q for q in points if q.alpha > 0 and q.budget == u.budget), key=lambda q: q.mean(test))
        lines.append(
            f"| {per_row(u, cfg.rows)} ({u.budget:,.0f}) | {u.text(test)} | {u.setting} | "
            f"{md.text(test)} ({md.alpha:g}) | {md.setting} | {signed(se)} | {p:.2g} | "
            f"{top.alpha:g}: {top.text(test)} | {_size(md, cfg.size) / _size(u, cfg.size):.2f}x |"
        )
    for budget, u in sorted(uniform.items()):
        if budget not in {r[0].budget for r in rows}:
            lines.append(f"| {per_row(u, cfg.rows)} ({budget:,.0f}) | {u.text(test)} | {u.setting} | — | | | | | |")
    lines += ["", f"Smallest MD at least as good as the best uniform model ({cfg.size.replace('_', ' ')}):", ""]
    for reading, how in (
        ("on_test", f"uniform with the best mean test {cfg.label}; MD at any alpha"),
        ("on_validation", f"uniform with the best mean validation {cfg.label}; MD at the alpha chosen on validation"),
    ):
        r = readings[reading]
        lines.append(
            f"* {reading.replace('_', ' ')} ({how}): best uniform {_point_text(r['best_uniform'], cfg)}; "
            + (
                f"smallest MD as good: {_point_text(r['smallest_md'], cfg)}, **{r['ratio']:.2f}x** its parameters."
                if r["smallest_md"]
                else "no MD configuration reaches it."
            )
        )
    figure = "md-budget-curve.png"
    _plot(points, cfg, context.out_dir / figure)
    claims = [_efficiency_claim(points, readings, cfg)]
    if rows:
        claims.append(_budget_claim(rows, cfg))
    return Section(
        "Parameter efficiency and MD against uniform per budget",
        "\n".join(lines) + "\n",
        figures=[figure],
        claims=claims,
    )

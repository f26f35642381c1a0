"""Popular against rare items in a mixed-dimension CF sweep (mixed-dimension-embeddings.txt, Sec. V-B, Fig. 3b/3c
and 3e/3f): test MSE on the ratings of the items holding the most popular and the least popular third of the
training mass, per budget, and train against test MSE of both thirds against alpha at one budget.

Every final run must hold ``test_mse_popular``, ``test_mse_rare``, ``train_mse_popular`` and ``train_mse_rare``.
The claim row: "a non-zero alpha improves the popular third and is on par or slightly better on the rare third",
read at each budget from MD at the alpha chosen on validation against the uniform table (Welch test at 5 %).
"""

from __future__ import annotations

from dataclasses import dataclass

from embreg.analysis.stats import welch_t_test
from embreg.registry import register
from embreg.studies.analyses._md_sweep import chosen_on_validation, per_row, sweep_points
from embreg.studies.sections import AnalysisContext, ClaimRow, Section


@dataclass
class MDPopularityConfig:
    """Arguments of ``md-popularity``.

    Attributes:
        rows: rows of all tables together, to print budgets per row (0: print the budget).
        fixed_budget: the budget of the train-vs-test panel (0: none).
        claim: the paper's claim, with its place.
    """

    rows: int = 0
    fixed_budget: float = 0.0
    claim: str = (
        "A non-zero alpha improves test loss on popular items and is on par with or slightly better than "
        "uniform on rare items (Sec. V-B, Fig. 3b/3e)"
    )


def _plot(points, cfg: MDPopularityConfig, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    alphas = sorted({p.alpha for p in points})
    for alpha, color in zip(alphas, plt.cm.viridis([i / max(1, len(alphas) - 1) * 0.9 for i in range(len(alphas))])):
        curve = sorted((p for p in points if p.alpha == alpha), key=lambda p: p.mean("embedding_parameters"))
        x = [p.mean("embedding_parameters") for p in curve]
        label = "uniform" if alpha == 0 else f"alpha={alpha:g}"
        axes[0].plot(x, [p.mean("test_mse_popular") for p in curve], color=color, marker="o", label=label)
        axes[0].plot(x, [p.mean("test_mse_rare") for p in curve], color=color, marker="x", linestyle="--")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("embedding parameters")
    axes[0].set_ylabel("test MSE")
    axes[0].set_title("popular third (solid) / rare third (dashed) of items")
    axes[0].legend(fontsize=8)
    fixed = sorted((p for p in points if p.budget == cfg.fixed_budget), key=lambda p: p.alpha)
    if fixed:
        a = [p.alpha for p in fixed]
        for metric, style, label in (
            ("test_mse_popular", "r-o", "popular, test"),
            ("train_mse_popular", "r--o", "popular, train"),
            ("test_mse_rare", "b-o", "rare, test"),
            ("train_mse_rare", "b--o", "rare, train"),
        ):
            axes[1].plot(a, [p.mean(metric) for p in fixed], style, label=label)
        axes[1].set_xlabel("alpha")
        axes[1].set_ylabel("MSE")
        axes[1].set_title(f"train vs test at budget {cfg.fixed_budget:,.0f}")
        axes[1].legend(fontsize=8)
    else:
        axes[1].set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@register(
    "analysis",
    "md-popularity",
    config=MDPopularityConfig,
    summary="MD vs uniform on the popular and the rare third of items (CF sweeps)",
    reference="mixed-dimension-embeddings.txt, Sec. V-B, Fig. 3b/3c",
)
def build(config: MDPopularityConfig, context: AnalysisContext) -> Section:
    cfg = config
    points = sweep_points(context.records)
    uniform = {p.budget: p for p in points if p.alpha == 0}
    lines = [
        "Test MSE on the ratings of the most popular / least popular third of items (thirds of the training "
        "popularity mass), mean ± std over seeds; MD at the alpha chosen on validation (overall MSE), and the "
        "range over every alpha.",
        "",
        "| budget | uniform: popular | MD: popular | every alpha: popular | uniform: rare | MD: rare | "
        "every alpha: rare |",
        "|---|---|---|---|---|---|---|",
    ]
    better_popular, worse_rare, n, first_p = [], [], 0, float("nan")
    for md in chosen_on_validation(points, "mse"):
        u = uniform.get(md.budget)
        if u is None:
            continue
        n += 1
        every = [p for p in points if p.alpha > 0 and p.budget == md.budget]
        spans = {
            m: f"{min(p.mean(m) for p in every):.4f}-{max(p.mean(m) for p in every):.4f}"
            for m in ("test_mse_popular", "test_mse_rare")
        }
        p_pop = welch_t_test(u.values("test_mse_popular"), md.values("test_mse_popular"))
        p_rare = welch_t_test(u.values("test_mse_rare"), md.values("test_mse_rare"))
        first_p = p_pop if n == 1 else first_p
        if md.mean("test_mse_popular") < u.mean("test_mse_popular"):
            better_popular.append((md, p_pop))
        if md.mean("test_mse_rare") > u.mean("test_mse_rare") and p_rare < 0.05:
            worse_rare.append(md)
        lines.append(
            f"| {per_row(u, cfg.rows)} | {u.text('test_mse_popular')} | {md.text('test_mse_popular')} "
            f"({md.alpha:g}) | {spans['test_mse_popular']} | {u.text('test_mse_rare')} | "
            f"{md.text('test_mse_rare')} | {spans['test_mse_rare']} |"
        )
    figure = "md-popular-rare.png"
    _plot(points, cfg, context.out_dir / figure)
    significant = sum(p < 0.05 for _, p in better_popular)
    reading = (
        f"MD (alpha chosen on validation) has the lower popular-third test MSE at {len(better_popular)} of {n} "
        f"budgets ({significant} at p < 0.05); its rare-third test MSE is significantly worse than uniform's "
        f"at {len(worse_rare)} of {n}"
        + (" (" + ", ".join(per_row(m, cfg.rows) for m in worse_rare) + ")" if worse_rare else "")
    )
    if n == 0:
        verdict = "not reproduced"
    elif len(better_popular) == n and not worse_rare:
        verdict = "reproduced"
    elif 2 * len(better_popular) > n:
        verdict = "partly"
    elif 2 * len(better_popular) < n:
        verdict = "opposite"
    else:
        verdict = "not reproduced"
    return Section(
        "Popular and rare items",
        "\n".join(lines) + "\n",
        figures=[figure],
        claims=[ClaimRow(cfg.claim, reading, verdict, first_p)],
    )

"""Mixed-dimension collaborative filtering case study on MovieLens-100k (mixed-dimension-embeddings.txt, Fig. 3).

For every (budget, alpha, seed) it trains the ``md-mf`` or ``md-ncf`` recipe with the user/item tables sized from
``embedding.budget`` (embedding-row parameters; ``alpha = 0`` is a plain uniform table at ``budget / rows``
dimensions, with no projections) and records

* test MSE (= RMSE^2 of the clamped predictions) at the best validation epoch,
* test and train MSE on the ratings of the most popular and the least popular third of items, thirds taken by
  *popularity mass* (training frequency), as in the paper's Appendix H,
* exact parameter counts: embedding tables (rows + projections) and the whole model.

Writes a JSON file with every run, a markdown table and three plots (MSE vs parameters; popular vs rare MSE vs
parameters; train vs test MSE for popular and rare items against alpha at a fixed budget).

With ``--tune-grid`` (alias ``--l2-grid``) one regularisation setting, ``--tune-key`` (default ``model.l2``, the
MF penalty; e.g. ``train.weight_decay`` or ``model.dropout`` for NCF, whose recipe has no L2 term), is tuned per
(budget, alpha) point, the same way for uniform (alpha 0) and MD: seed ``--tune-seed`` (with ``--tune-seeds N``,
that seed and the next N - 1) is trained at every grid value (early stopping on validation RMSE as always), the
value with the lowest (mean) validation MSE is kept, and every seed is trained at it; only those runs enter the
tables. The test split is never looked at while choosing. ``--md-max-budget-dim`` limits MD (alpha > 0) to the
smaller budgets.

Example:
    python benchmarks/md_cf_study.py --model mf --budget-dims 1 2 4 8 16 32 --alphas 0 0.1 0.2 0.3 0.4 0.5 \
        --seeds 3 --fixed-budget-dim 16 --out docs/results/mixed-dimension-cf-mf
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from md_study_sweep import (
    RunLog,
    add_tuning_arguments,
    efficiency,
    efficiency_markdown,
    ordered_alphas,
    output_path,
    tune_point,
    tuning_markdown,
)

from embreg.recipes import load_recipe
from embreg.recipes.builders import build_batches, build_evaluator, build_model, prepare_data
from embreg.train.optim import optimizer_factory
from embreg.train.seeding import seed_everything
from embreg.train.trainer import Trainer


def popularity_thirds(train_items: np.ndarray, num_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks over items: the most popular items holding the first third of the training mass, and the
    least popular items holding the last third (by cumulative frequency, most popular first)."""
    counts = np.bincount(train_items, minlength=num_items).astype(np.float64)
    order = np.argsort(-counts, kind="stable")
    cumulative = np.cumsum(counts[order]) / counts.sum()
    popular, rare = np.zeros(num_items, bool), np.zeros(num_items, bool)
    popular[order[cumulative <= 1 / 3 + 1e-12]] = True
    rare[order[cumulative > 2 / 3]] = True
    return popular, rare


def embedding_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for name, p in model.named_parameters()
               if name.startswith(("user_embedding.", "item_embedding.")))


def run_one(recipe: str, overrides: list[str], data, groups) -> dict:
    cfg = load_recipe(recipe, overrides)
    torch.set_num_threads(cfg.train.threads or 1)
    seed_everything(cfg.train.seed)
    model = build_model(cfg, data)
    evaluator = build_evaluator(cfg, data)
    t = cfg.train
    trainer = Trainer(model, optimizer_factory(t.optimizer, t.lr, t.weight_decay), build_batches(cfg, data),
                      evaluator, epochs=t.epochs, monitor=cfg.monitor[0], mode=cfg.monitor[1], patience=t.patience,
                      progress=False)
    started = time.perf_counter()
    result = trainer.fit()
    seconds = time.perf_counter() - started
    row = {"recipe": recipe, "overrides": overrides, "seed": t.seed, "alpha": cfg.embedding.alpha, "l2": cfg.model.l2,
           "budget": cfg.embedding.budget, "best_epoch": result.best_epoch, "epochs_run": result.metrics["epochs_run"],
           "seconds": seconds, "val_mse": result.metrics["val_rmse"] ** 2, "test_mse": result.metrics["test_rmse"] ** 2,
           "embedding_parameters": embedding_parameters(model),
           "model_parameters": sum(p.numel() for p in model.parameters())}
    for name in ("user_embedding", "item_embedding"):
        row[f"{name}_dims"] = list(getattr(getattr(model, name), "block_dims", [getattr(model, name).embedding_dim]))
    row["base_dim"] = model.user_embedding.embedding_dim
    popular, rare = groups
    for split in ("train", "test"):
        predictions = evaluator.predict(model, split).double()
        target = evaluator.splits[split]["rating"].double()
        items = evaluator.splits[split]["item"].numpy()
        for group, mask in (("popular", popular), ("rare", rare)):
            keep = torch.from_numpy(mask[items])
            row[f"{split}_mse_{group}"] = float((predictions[keep] - target[keep]).pow(2).mean())
            row[f"{split}_n_{group}"] = int(keep.sum())
    return row


def summarise(rows: list[dict]) -> list[dict]:
    """Mean and std over seeds of every numeric column, per (budget, alpha)."""
    keys = sorted({(r["budget"], r["alpha"]) for r in rows})
    out = []
    for budget, alpha in keys:
        group = [r for r in rows if r["budget"] == budget and r["alpha"] == alpha]
        entry = {"budget": budget, "alpha": alpha, "seeds": [r["seed"] for r in group], "l2": group[0].get("l2"),
                 "tuned": group[0].get("tuned")}
        for key in ("test_mse", "val_mse", "test_mse_popular", "test_mse_rare", "train_mse_popular",
                    "train_mse_rare", "embedding_parameters", "model_parameters", "seconds", "best_epoch"):
            values = np.array([r[key] for r in group], dtype=np.float64)
            entry[key] = float(values.mean())
            entry[key + "_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        entry["user_dims"], entry["item_dims"] = group[0]["user_embedding_dims"], group[0]["item_embedding_dims"]
        out.append(entry)
    return out


def _setting(entry: dict, key: str) -> str:
    """The tuned value of a summary entry (older MF runs carry it only as their L2 weight)."""
    value = entry.get("tuned")
    if value is None and key == "model.l2":
        value = entry.get("l2")
    return "" if value is None else format(value, "g")


def markdown(summary: list[dict], title: str, key: str) -> str:
    lines = [f"### {title}", "",
             f"| budget (rows) | alpha | {key} | emb. params | model params | val MSE | test MSE | popular-third MSE | "
             "rare-third MSE | item dims |", "|---|---|---|---|---|---|---|---|---|---|"]
    for e in summary:
        lines.append(
            f"| {e['budget']:.0f} | {e['alpha']:.1f} | {_setting(e, key)} | "
            f"{e['embedding_parameters']:.0f} | "
            f"{e['model_parameters']:.0f} | {e['val_mse']:.4f} ± {e['val_mse_std']:.4f} "
            f"| {e['test_mse']:.4f} ± {e['test_mse_std']:.4f} | {e['test_mse_popular']:.4f} ± "
            f"{e['test_mse_popular_std']:.4f} | {e['test_mse_rare']:.4f} ± {e['test_mse_rare_std']:.4f} | "
            f"{e['item_dims']} |")
    return "\n".join(lines) + "\n"


def plot(summary: list[dict], fixed_budget: float | None, path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    alphas = sorted({e["alpha"] for e in summary})
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(alphas)))
    for alpha, color in zip(alphas, colors):
        entries = sorted((e for e in summary if e["alpha"] == alpha), key=lambda e: e["embedding_parameters"])
        x = [e["embedding_parameters"] for e in entries]
        axes[0].errorbar(x, [e["test_mse"] for e in entries], yerr=[e["test_mse_std"] for e in entries],
                         color=color, marker="o", label=f"alpha={alpha:.1f}", capsize=2)
        axes[1].plot(x, [e["test_mse_popular"] for e in entries], color=color, marker="o", label=f"alpha={alpha:.1f}")
        axes[1].plot(x, [e["test_mse_rare"] for e in entries], color=color, marker="x", linestyle="--")
    for ax in axes[:2]:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("embedding parameters (rows + projections)")
    axes[0].set_ylabel("test MSE")
    axes[0].set_title(f"{title}: test MSE vs parameters")
    axes[0].legend(fontsize=8)
    axes[1].set_ylabel("test MSE")
    axes[1].set_title("popular third (solid) / rare third (dashed) of items")
    if fixed_budget is not None:
        fixed = sorted((e for e in summary if e["budget"] == fixed_budget), key=lambda e: e["alpha"])
        a = [e["alpha"] for e in fixed]
        axes[2].plot(a, [e["test_mse_popular"] for e in fixed], "r-o", label="popular, test")
        axes[2].plot(a, [e["train_mse_popular"] for e in fixed], "r--o", label="popular, train")
        axes[2].plot(a, [e["test_mse_rare"] for e in fixed], "b-o", label="rare, test")
        axes[2].plot(a, [e["train_mse_rare"] for e in fixed], "b--o", label="rare, train")
        axes[2].set_xlabel("alpha")
        axes[2].set_ylabel("MSE")
        axes[2].set_title(f"train vs test at budget {fixed_budget:.0f}")
        axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["mf", "ncf"], default="mf")
    parser.add_argument("--budget-dims", type=float, nargs="+", default=[1, 2, 4, 8, 16, 32],
                        help="budgets as uniform-equivalent dimensions: budget = dim * (users + items)")
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--fixed-budget-dim", type=float, default=None)
    parser.add_argument("--set", action="append", default=[], help="extra recipe override key=value")
    add_tuning_arguments(parser, "model.l2", "validation MSE", ("--l2-grid",))
    parser.add_argument("--md-max-budget-dim", type=float, default=None,
                        help="run MD (alpha > 0) only at budgets up to this many parameters per row")
    parser.add_argument("--out", required=True, help="output prefix (writes .json, .md, .png)")
    args = parser.parse_args(argv)
    if args.fixed_budget_dim is not None and args.fixed_budget_dim not in args.budget_dims:
        parser.error(f"--fixed-budget-dim {args.fixed_budget_dim:g} is not one of --budget-dims "
                     f"{' '.join(f'{d:g}' for d in args.budget_dims)}: its train-vs-test panel would be empty")
    recipe = f"md-{args.model}"
    base = ["train.progress=false", "train.threads=1", *args.set]
    data = prepare_data(load_recipe(recipe, base))
    train = data.part("train")
    rows_total = data.ratings.num_users + data.ratings.num_items
    groups = popularity_thirds(train.items, data.ratings.num_items)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    log = RunLog(out, args.tune_key)  # finished runs, for resuming
    rows, tuning = [], []

    def train(budget: float, alpha: float, seed: int, value: float | None) -> dict:
        overrides = base + ["embedding.kind=md", f"embedding.alpha={alpha}", f"embedding.budget={budget}",
                            f"train.seed={seed}"]
        row, fresh = log.get(budget, alpha, seed, value, lambda o: run_one(recipe, o, data, groups), overrides)
        if fresh:
            print(f"budget {budget:.0f} alpha {alpha} {args.tune_key} {value} seed {seed}: val MSE "
                  f"{row['val_mse']:.4f} test MSE {row['test_mse']:.4f} ({row['embedding_parameters']} emb. params, "
                  f"{row['seconds']:.1f} s)", flush=True)
        return row

    for alpha in ordered_alphas(args.alphas):
        for dim in args.budget_dims:
            budget = dim * rows_total
            if alpha > 0 and budget <= rows_total:
                continue  # one parameter per row: every alpha gives dimension 1 everywhere, the alpha = 0 model
            if alpha > 0 and args.md_max_budget_dim is not None and dim > args.md_max_budget_dim:
                continue
            chosen, record = tune_point(lambda seed, value: train(budget, alpha, seed, value), args.tune_grid,
                                        args.tune_seed, "val_mse", args.tune_key, args.tune_seeds)
            if record is not None:
                tuning.append({"budget": budget, "alpha": alpha, **record})
            for seed in range(args.seeds):
                rows.append(train(budget, alpha, seed, chosen))
    summary = summarise(rows)
    fixed = args.fixed_budget_dim * rows_total if args.fixed_budget_dim is not None else None
    command = "python " + shlex.join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])])
    machine = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
               "cpus": os.cpu_count(), "torch": torch.__version__, "threads": 1, "gpu": None}
    eff = efficiency(summary, "mse")
    record = {"command": command, "machine": machine, "dataset": "ml-100k (split seed 0, 80/10/10 random)",
              "recipe": recipe, "rows": rows, "summary": summary, "efficiency": eff,
              "groups": {"popular_items": int(groups[0].sum()), "rare_items": int(groups[1].sum())},
              "tuning": tuning}
    output_path(out, ".json").write_text(json.dumps(record, indent=1))
    title = f"{args.model.upper()} on MovieLens-100k"
    output_path(out, ".md").write_text(f"<!-- generated by: {command} -->\n\n" + markdown(summary, title, args.tune_key)
                                      + "\n" + efficiency_markdown(eff, "MSE") + tuning_markdown(tuning, args.tune_key, "val_mse", "validation MSE"))
    plot(summary, fixed, output_path(out, ".png"), title)
    print(markdown(summary, title, args.tune_key))
    print(efficiency_markdown(eff, "MSE"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

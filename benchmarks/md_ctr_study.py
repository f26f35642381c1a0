"""Mixed-dimension embeddings for CTR prediction on real tables (mixed-dimension-embeddings.txt, Fig. 2 and 8).

DLRM (``ctr-*`` recipes) with one embedding per categorical field, sized by Alg. 1 from measured training
frequencies (one block per field, Sec. III) under a sweep of parameter budgets and temperatures. For every
(dataset, budget, alpha, seed) it records the test log-loss, accuracy and AUC at the best validation epoch,
exact parameter counts (embeddings incl. projections, and the whole model, as the paper counts) and the
per-epoch history, from which the training time to reach a target validation log-loss and the time to the
best epoch are computed (Fig. 2c). The tables end with the parameter-efficiency reading of ``md_study_sweep``
(the smallest MD model as good as the best uniform one; MD against uniform at each budget, alpha chosen on
validation) and the time to target of uniform against MD at each budget.

With ``--tune-grid`` one regularisation setting (``--tune-key``, e.g. ``train.weight_decay``) is tuned per
(budget, alpha) point on the validation log-loss of ``--tune-seed`` (with ``--tune-seeds N``, the mean over it
and the next N - 1 seeds), the same way for uniform (alpha 0) and MD,
and every seed is trained at the chosen value (the protocol of ``md_cf_study.py``).

Example:
    python benchmarks/md_ctr_study.py --dataset adult --budget-dims 1 2 8 --alphas 0 0.1 0.2 0.3 0.4 0.5 \
        --seeds 3 --out docs/results/mixed-dimension-ctr-adult
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

RECIPES = {"adult": "md-ctr-adult", "ml-100k-ctr": "md-ctr-ml100k"}


def run_one(recipe: str, overrides: list[str], data) -> dict:
    cfg = load_recipe(recipe, overrides)
    torch.set_num_threads(cfg.train.threads or 1)
    seed_everything(cfg.train.seed)
    model = build_model(cfg, data)
    t = cfg.train
    trainer = Trainer(model, optimizer_factory(t.optimizer, t.lr, t.weight_decay), build_batches(cfg, data),
                      build_evaluator(cfg, data), epochs=t.epochs, monitor="val_logloss", mode="min",
                      patience=t.patience, progress=False)
    started = time.perf_counter()
    result = trainer.fit()
    emb = [p.numel() for n, p in model.named_parameters() if n.startswith(("embeddings.", "bag_embeddings."))]
    dims = [list(getattr(m, "block_dims", None) or getattr(getattr(m, "embedding", m), "block_dims", None)
                 or [m.embedding_dim]) for m in [*model.embeddings, *model.bag_embeddings]]
    return {"overrides": overrides, "seed": t.seed, "alpha": cfg.embedding.alpha, "budget": cfg.embedding.budget,
            "seconds": time.perf_counter() - started, "best_epoch": result.best_epoch,
            "embedding_parameters": sum(emb), "model_parameters": sum(p.numel() for p in model.parameters()),
            "base_dim": model.dim, "field_dims": [d[0] for d in dims],
            **{k: v for k, v in result.metrics.items() if k.startswith(("test_", "val_"))},
            "history": [{"epoch": h["epoch"], "seconds": h["seconds"], "val_logloss": h["val_logloss"]}
                        for h in result.history]}


def time_to_target(history: list[dict], target: float) -> float | None:
    """Training seconds (sum of epoch times) until the validation log-loss first reaches ``target``."""
    elapsed = 0.0
    for h in history:
        elapsed += h["seconds"]
        if h["val_logloss"] <= target:
            return elapsed
    return None


def seconds_to_best(row: dict) -> float:
    """Training seconds (sum of epoch times) up to and including the best validation epoch: the time it took
    to train the model that is scored (paper Fig. 2c's "train time"; the patience epochs after it are left
    out)."""
    return sum(h["seconds"] for h in row["history"] if h["epoch"] <= row["best_epoch"])


def summarise(rows: list[dict], target: float) -> list[dict]:
    out = []
    for budget, alpha in sorted({(r["budget"], r["alpha"]) for r in rows}):
        group = [r for r in rows if r["budget"] == budget and r["alpha"] == alpha]
        entry = {"budget": budget, "alpha": alpha, "seeds": [r["seed"] for r in group],
                 "field_dims": group[0]["field_dims"], "base_dim": group[0]["base_dim"]}
        for key in ("test_logloss", "test_accuracy", "test_auc", "val_logloss", "embedding_parameters",
                    "model_parameters", "seconds"):
            values = np.array([r[key] for r in group], dtype=np.float64)
            entry[key] = float(values.mean())
            entry[key + "_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        reached = [time_to_target(r["history"], target) for r in group]
        entry["time_to_target"] = [None if s is None else round(s, 2) for s in reached]
        to_best = np.array([seconds_to_best(r) for r in group])
        entry["seconds_to_best"] = float(to_best.mean())
        entry["seconds_to_best_std"] = float(to_best.std(ddof=1)) if len(to_best) > 1 else 0.0
        out.append(entry)
    return out


def reached_text(times: list[float | None]) -> str:
    """``"k/N, median X s"``: how many seeds reached the target, and the median time of those that did."""
    done = [t for t in times if t is not None]
    return f"{len(done)}/{len(times)}" + (f", median {float(np.median(done)):.1f} s" if done else "")


def markdown(summary: list[dict], title: str, target: float) -> str:
    lines = [f"### {title}", "", f"time to target: training seconds until the validation log-loss first reaches "
             f"{target:.4f} (seeds that reached it / seeds, median seconds of those); train time: seconds up to "
             "the best validation epoch (mean ± std)", "",
             "| budget (rows) | alpha | emb. params | model params | val log-loss | test log-loss | test accuracy | "
             "test AUC | time to target | train time (s) | field dims |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in summary:
        lines.append(f"| {e['budget']:.0f} | {e['alpha']:.1f} | {e['embedding_parameters']:.0f} | "
                     f"{e['model_parameters']:.0f} | {e['val_logloss']:.4f} ± {e['val_logloss_std']:.4f} | "
                     f"{e['test_logloss']:.4f} ± {e['test_logloss_std']:.4f} | "
                     f"{e['test_accuracy']:.4f} ± {e['test_accuracy_std']:.4f} | {e['test_auc']:.4f} ± "
                     f"{e['test_auc_std']:.4f} | {reached_text(e['time_to_target'])} | "
                     f"{e['seconds_to_best']:.1f} ± {e['seconds_to_best_std']:.1f} | {e['field_dims']} |")
    return "\n".join(lines) + "\n"


def time_markdown(summary: list[dict], eff: dict) -> str:
    """Per budget, the uniform table against MD at the alpha chosen on validation: time to the target log-loss
    (paper Fig. 2c's question, at equal budget) and train time to the best epoch."""
    if not eff:
        return ""
    entry = {(e["budget"], e["alpha"]): e for e in summary}
    lines = ["", "Time, uniform against MD at the alpha chosen on validation (same budget):", "",
             "| budget | uniform: time to target | uniform: train time (s) | MD alpha | MD: time to target | "
             "MD: train time (s) |", "|---|---|---|---|---|---|"]
    for r in eff["per_budget"]:
        u, m = entry[(r["budget"], 0.0)], entry[(r["budget"], r["val_alpha"])]
        lines.append(f"| {r['budget']:.0f} | {reached_text(u['time_to_target'])} | {u['seconds_to_best']:.1f} ± "
                     f"{u['seconds_to_best_std']:.1f} | {r['val_alpha']:.1f} | {reached_text(m['time_to_target'])} | "
                     f"{m['seconds_to_best']:.1f} ± {m['seconds_to_best_std']:.1f} |")
    return "\n".join(lines) + "\n"


def plot(summary: list[dict], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    alphas = sorted({e["alpha"] for e in summary})
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(alphas)))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    for alpha, color in zip(alphas, colors):
        entries = sorted((e for e in summary if e["alpha"] == alpha), key=lambda e: e["model_parameters"])
        x = [e["model_parameters"] for e in entries]
        for ax, key in zip(axes, ("test_logloss", "test_accuracy")):
            ax.errorbar(x, [e[key] for e in entries], yerr=[e[key + "_std"] for e in entries], color=color,
                        marker="o", capsize=2, label=f"alpha={alpha:.1f}")
        axes[2].errorbar([e["seconds_to_best"] for e in entries], [e["test_logloss"] for e in entries],
                         xerr=[e["seconds_to_best_std"] for e in entries], color=color, marker="o", capsize=2,
                         linestyle="none", label=f"alpha={alpha:.1f}")
    for ax, name in zip(axes, ("test log-loss", "test accuracy")):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("model parameters (all, as the paper counts)")
        ax.set_ylabel(name)
        ax.set_title(f"{title}: {name}")
    axes[2].set_xlabel("train time to the best epoch (s, one CPU thread)")
    axes[2].set_ylabel("test log-loss")
    axes[2].set_title("train time vs test log-loss (Fig. 2c)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", choices=sorted(RECIPES), required=True)
    parser.add_argument("--budget-dims", type=float, nargs="+", default=[1, 2, 8])
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--target-slack", type=float, default=0.005,
                        help="target = best mean validation log-loss of the uniform (alpha 0) runs + this slack")
    parser.add_argument("--set", action="append", default=[], help="extra recipe override key=value")
    add_tuning_arguments(parser, "train.weight_decay", "validation log-loss")
    parser.add_argument("--note", default="shared 2-core machine with other jobs running: times are indicative",
                        help="what else ran on the machine (kept in the JSON beside the times)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    recipe = RECIPES[args.dataset]
    base = ["train.progress=false", "train.threads=1", *args.set]
    data = prepare_data(load_recipe(recipe, base))
    rows_total = sum(data.table.cardinalities) + sum(data.table.bag_cardinalities)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    log = RunLog(out, args.tune_key)  # finished runs, for resuming
    rows, tuning = [], []

    def train(budget: float, alpha: float, seed: int, value: float | None) -> dict:
        overrides = base + [f"embedding.alpha={alpha}", f"embedding.budget={budget}", f"train.seed={seed}"]
        row, fresh = log.get(budget, alpha, seed, value, lambda o: run_one(recipe, o, data), overrides)
        if fresh:
            print(f"{args.dataset} budget {budget:.0f} alpha {alpha} {args.tune_key} {value} seed {seed}: test "
                  f"log-loss {row['test_logloss']:.4f} acc {row['test_accuracy']:.4f} ({row['model_parameters']} "
                  f"params, {row['seconds']:.1f} s)", flush=True)
        return row

    for alpha in ordered_alphas(args.alphas):
        for dim in args.budget_dims:
            budget = dim * rows_total
            if alpha > 0 and budget <= rows_total:
                continue  # one parameter per row: every alpha gives dimension 1 everywhere, the alpha = 0 model
            chosen, record = tune_point(lambda seed, value: train(budget, alpha, seed, value), args.tune_grid,
                                        args.tune_seed, "val_logloss", args.tune_key, args.tune_seeds)
            if record is not None:
                tuning.append({"budget": budget, "alpha": alpha, **record})
            rows.extend(train(budget, alpha, seed, chosen) for seed in range(args.seeds))
    uniform = {}
    for r in rows:
        if r["alpha"] == 0:
            uniform.setdefault(r["budget"], []).append(r["val_logloss"])
    target = min(float(np.mean(v)) for v in uniform.values()) + args.target_slack
    summary = summarise(rows, target)
    eff = efficiency(summary, "logloss", "model_parameters")
    command = "python " + shlex.join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])])
    machine = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
               "cpus": os.cpu_count(), "torch": torch.__version__, "threads": 1, "gpu": None,
               "note": args.note}
    record = {"command": command, "machine": machine, "dataset": args.dataset, "recipe": recipe,
              "rows_total": rows_total, "target_val_logloss": target, "rows": rows, "summary": summary,
              "efficiency": eff, "tuning": tuning}
    output_path(out, ".json").write_text(json.dumps(record, indent=1))
    title = f"DLRM on {args.dataset}"
    table = (markdown(summary, title, target) + "\n"
             + efficiency_markdown(eff, "log-loss", "model parameters") + time_markdown(summary, eff))
    output_path(out, ".md").write_text(f"<!-- generated by: {command} -->\n\n" + table
                                      + tuning_markdown(tuning, args.tune_key, "val_logloss", "validation log-loss"))
    plot(summary, output_path(out, ".png"), title)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

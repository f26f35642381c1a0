"""Reproduces the SSE paper's recommender tables (Tables 1-3) on MovieLens-100k with equal tuning budgets.

Stages (run in order; each reads the previous stage's output under --out):

    sweep   every variant gets the same number of Optuna TPE trials (same sampler seed) on the validation split
    final   the best configuration of each variant is trained with --seeds training seeds on the same split
    curves  learning curves (train and validation RMSE per epoch) of tuned MF with and without SSE (paper Fig. 4)
    report  tables (mean ± std, Welch and Mann-Whitney p-values vs the plain model) as JSON + markdown, and plots

Example (the command that made docs/results/sse-recsys.md):

    python benchmarks/sse_recsys.py --stage all --trials 30 --seeds 5 --out runs/sse-recsys
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import yaml

from embreg.config import from_dict, load_yaml
from embreg.recipes import load_recipe
from embreg.recipes.registry import recipe_path
from embreg.recipes.run import run_seeds, run_single
from embreg.recipes.schema import RecipeConfig
from embreg.recipes.sweep import sweep
from embreg.train.compare import compare_runs, format_markdown

FAMILIES = {
    "mf": ["mf", "mf-dropout", "mf-sse-se", "mf-sse-graph"],
    "bpr": ["bpr", "bpr-dropout", "bpr-sse-se", "bpr-sse-graph"],
}
METRICS = {
    "mf": ["test_rmse", "test_mae", "val_rmse", "best_epoch"],
    "bpr": ["test_precision@1", "test_precision@5", "test_precision@10", "test_recall@10", "test_ndcg@10",
            "test_hit@10", "val_ndcg@10"],
}
RUN_SETTINGS = ["train.threads=1", "train.progress=false"]


def stage_sweep(variants: list[str], out: Path, trials: int) -> None:
    for name in variants:
        target = out / "sweeps" / name
        if (target / "best.yaml").exists():
            print(f"[sweep] {name}: done already ({target / 'best.yaml'})")
            continue
        started = time.time()
        best = sweep(name, trials=trials, overrides=RUN_SETTINGS, out_dir=target, seed=0)
        print(f"[sweep] {name}: {best['monitor']}={best['value']:.4f} {best['params']} "
              f"({time.time() - started:.0f}s)", flush=True)


def tuned_config(out: Path, name: str) -> RecipeConfig:
    return from_dict(RecipeConfig, load_yaml(out / "sweeps" / name / "best.yaml"))


def stage_final(variants: list[str], out: Path, seeds: int) -> None:
    for name in variants:
        target = out / "final" / name
        if (target / "summary.json").exists():
            print(f"[final] {name}: done already")
            continue
        started = time.time()
        summary = run_seeds(tuned_config(out, name), target, seeds, resume=True)
        key = "test_rmse" if "test_rmse" in summary else "test_precision@10"
        print(f"[final] {name}: {key} {summary[key]['mean']:.4f} ± {summary[key]['std']:.4f} "
              f"({time.time() - started:.0f}s)", flush=True)


def stage_curves(out: Path, epochs: int) -> None:
    for name in ("mf", "mf-sse-se", "mf-sse-graph"):
        target = out / "curves" / name
        if (target / "metrics.json").exists():
            continue
        cfg = tuned_config(out, name)
        cfg.train.eval_train = True
        cfg.train.patience = None
        cfg.train.epochs = epochs
        run_single(cfg, target)


def stage_report(out: Path, results: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results.mkdir(parents=True, exist_ok=True)
    report: dict = {}
    for family, variants in FAMILIES.items():
        dirs = [out / "final" / v for v in variants if (out / "final" / v / "summary.json").exists()]
        if len(dirs) < 2:
            continue
        table = compare_runs(dirs, metrics=METRICS[family])
        (results / f"sse-recsys-{family}-table.md").write_text(format_markdown(table))
        report[family] = {
            "table": json.loads((dirs[0] / "summary.json").read_text()) and {
                d.name: json.loads((d / "summary.json").read_text()) for d in dirs},
            "tuned": {d.name: _tuned_values(out, d.name) for d in dirs},
        }
    (results / "sse-recsys.json").write_text(json.dumps(report, indent=2, sort_keys=True))

    curve_dirs = [out / "curves" / n for n in ("mf", "mf-sse-se", "mf-sse-graph")]
    if all((d / "history.jsonl").exists() for d in curve_dirs):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=False)
        for d, colour in zip(curve_dirs, ("tab:gray", "tab:blue", "tab:green")):
            history = [json.loads(line) for line in (d / "history.jsonl").read_text().splitlines()]
            epochs = [h["epoch"] + 1 for h in history]
            axes[0].plot(epochs, [h["train_rmse"] for h in history], color=colour, label=d.name)
            axes[1].plot(epochs, [h["val_rmse"] for h in history], color=colour, label=d.name)
        axes[0].set_title("training RMSE (eval mode)")
        axes[1].set_title("validation RMSE")
        for ax in axes:
            ax.set_xlabel("epoch")
            ax.set_ylabel("RMSE")
            ax.grid(alpha=0.3)
            ax.legend()
        fig.suptitle("MovieLens-100k, tuned MF with and without SSE (seed 0, no early stopping)")
        fig.tight_layout()
        fig.savefig(results / "sse-recsys-learning-curves.png", dpi=120)
    print(f"[report] written to {results}")


def _tuned_values(out: Path, name: str) -> dict:
    cfg = yaml.safe_load((out / "sweeps" / name / "best.yaml").read_text())
    keys = load_recipe(name).search.keys()
    values = {}
    for key in keys:
        node = cfg
        for part in key.split("."):
            node = node[part]
        values[key] = node
    values["tuned"] = cfg.get("tuned", "")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stage", choices=["sweep", "final", "curves", "report", "all"], default="all")
    parser.add_argument("--family", choices=["mf", "bpr", "all"], default="all")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--curve-epochs", type=int, default=60)
    parser.add_argument("--out", default="runs/sse-recsys")
    parser.add_argument("--results", default="docs/results")
    args = parser.parse_args(argv)
    out = Path(args.out)
    variants = [v for f, vs in FAMILIES.items() if args.family in (f, "all") for v in vs]
    if args.stage in ("sweep", "all"):
        stage_sweep(variants, out, args.trials)
    if args.stage in ("final", "all"):
        stage_final(variants, out, args.seeds)
    if args.stage in ("curves", "all") and args.family in ("mf", "all"):
        stage_curves(out, args.curve_epochs)
    if args.stage in ("report", "all"):
        stage_report(out, Path(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Runs the dropout-regulariser experiments of docs/results/dropout-regularizers.md, resumably, one at a time.

Each configuration is an LM recipe plus overrides, trained into ``RUNS/<label>`` with ``--resume`` semantics: running
this script again continues every unfinished run (a larger ``--epochs`` extends finished ones). After each run the
collected per-epoch histories go to ``docs/results/dropout-regularizers.json`` and the plots to
``docs/results/dropout-regularizers*.png``.

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/dropout_experiments.py --epochs 8   # everything, in order
    python benchmarks/dropout_experiments.py --only r_approx dropout1         # a subset, in this order
    python benchmarks/dropout_experiments.py --report-only                    # just rebuild JSON and plots
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from pathlib import Path

import torch

from embreg.recipes.lm_run import load_lm_recipe, run_lm_single

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"

CONFIGS: list[tuple[str, str, list[str]]] = [
    ("dropout1", "lm-dropout", []),
    ("none", "lm-none", []),
    ("r_approx", "lm-r-approx", []),
    ("r_approx_xi", "lm-r-approx-xi", []),
    ("dropout2", "lm-dropout-k", ["technique.k=2"]),
    ("dropout4", "lm-dropout-k", ["technique.k=4"]),
    ("dropout4_xi", "lm-dropout-k-xi", ["technique.k=4"]),
    ("r_identity", "lm-r-identity", []),
    ("dropout8", "lm-dropout-k", ["technique.k=8"]),
    ("r_tilde", "lm-r-tilde", []),
    ("l2_1e-4", "lm-l2", ["train.weight_decay=1e-4"]),
    ("l2_1e-5", "lm-l2", ["train.weight_decay=1e-5"]),
    ("l2_1e-3", "lm-l2", ["train.weight_decay=1e-3"]),
    ("l2_3e-5", "lm-l2", ["train.weight_decay=3e-5"]),
    ("l2_3e-4", "lm-l2", ["train.weight_decay=3e-4"]),
    ("dropout4_two_mask", "lm-dropout-k-two-mask", ["technique.k=4"]),
    ("r_approx_8", "lm-r-approx", ["technique.samples=8"]),  # Tables 3/4: R_approx, 8 label samples
    ("dropout8_xi", "lm-dropout-k-xi", ["technique.k=8"]),   # Tables 3/4: Algorithm 4, k = 8
    ("r_tilde_xi", "lm-r-approx-xi", ["technique.form=loss_jacobian"]),  # Table 1: R~_approx with implicit noise
    # a second training seed for the Fig. 1 trend (Dropout_k against k), whose differences are a few points
    ("dropout1_seed1", "lm-dropout", ["train.seed=1"]),
    ("dropout2_seed1", "lm-dropout-k", ["technique.k=2", "train.seed=1"]),
    ("dropout4_seed1", "lm-dropout-k", ["technique.k=4", "train.seed=1"]),
    ("dropout8_seed1", "lm-dropout-k", ["technique.k=8", "train.seed=1"]),
]
"""(label, recipe, overrides) in the order they are run."""


def collect(runs: Path) -> dict:
    """Per-epoch histories and final metrics of every run directory under ``runs``."""
    out: dict = {}
    for label, recipe, overrides in CONFIGS:
        run = runs / label
        if not (run / "history.jsonl").exists():
            continue
        history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines() if line]
        metrics = json.loads((run / "metrics.json").read_text()) if (run / "metrics.json").exists() else {}
        out[label] = {"recipe": recipe, "overrides": overrides, "history": history, "metrics": metrics}
    return out


def plot(results: dict, path: Path) -> None:
    """Validation perplexity per epoch, one panel per paper figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("Fig. 1: Dropout_k", ["none", "dropout1", "dropout2", "dropout4", "dropout8"]),
        ("Fig. 3: explicit only", ["none", "dropout1", "dropout8", "r_approx", "l2_1e-5", "l2_3e-5", "l2_1e-4",
                                   "l2_3e-4", "l2_1e-3"]),
        ("Fig. 4/2: Dropout_k + noise", ["dropout1", "dropout4", "dropout4_xi", "dropout4_two_mask", "dropout8",
                                         "dropout8_xi"]),
        ("Fig. 5 / Sec. 5.2", ["dropout1", "r_approx", "r_approx_8", "r_approx_xi", "r_tilde", "r_identity"]),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), sharey=True)
    palette = plt.get_cmap("tab20").colors
    colours = {label: palette[i % len(palette)] for i, (label, _, _) in enumerate(CONFIGS)}
    for ax, (title, labels) in zip(axes, panels):
        for label in labels:
            if label in results:
                hist = results[label]["history"]
                ax.plot([r["epoch"] + 1 for r in hist], [r["val_ppl"] for r in hist], marker="o", label=label,
                        color=colours[label])
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("validation perplexity")
    axes[0].set_ylim(top=min(800, axes[0].get_ylim()[1]))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", default=str(ROOT / "runs" / "dropout-regularizers"))
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--patience", type=int, default=None,
                        help="stop a run after this many epochs without a better validation perplexity (default: "
                             "run all epochs); a resumed run keeps its count")
    parser.add_argument("--only", nargs="*", help="labels to run, in the order given (default: all, in CONFIGS order)")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    command = "python benchmarks/dropout_experiments.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    torch.set_num_threads(1)
    runs = Path(args.runs)
    known = {label: (recipe, overrides) for label, recipe, overrides in CONFIGS}
    unknown = [label for label in args.only or [] if label not in known]
    if unknown:
        parser.error(f"--only {unknown}: not in CONFIGS ({sorted(known)})")
    order = list(dict.fromkeys(args.only)) if args.only else list(known)  # --only runs in the order given
    if not args.report_only:
        for label in order:
            recipe, overrides = known[label]
            extra = [f"train.epochs={args.epochs}", "train.progress=false"]
            if args.patience is not None:
                extra.append(f"train.patience={args.patience}")
            cfg = load_lm_recipe(recipe, overrides + extra)
            started = time.time()
            result = run_lm_single(cfg, runs / label, resume=True)
            print(f"{label}: best val ppl {result.metrics['val_ppl']:.2f} (epoch {result.best_epoch + 1}), "
                  f"test ppl {result.metrics['test_ppl']:.2f}, {time.time() - started:.0f} s", flush=True)
            report(runs, command)
    report(runs, command)


def report(runs: Path, command: str) -> None:
    results = collect(runs)
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"machine": f"{platform.machine()} CPU, torch {torch.__version__}, 1 thread (shared 2-core host)",
               "command": command, "runs": results}
    (RESULTS / "dropout-regularizers.json").write_text(json.dumps(payload, indent=1) + "\n")
    if results:
        plot(results, RESULTS / "dropout-regularizers.png")
    (RESULTS / "dropout-regularizers-table.md").write_text(table(results))


def table(results: dict) -> str:
    """Markdown: best validation perplexity, the test perplexity of that epoch, epochs run, seconds per epoch."""
    lines = ["| run | recipe + overrides | epochs run | best epoch | best val ppl | test ppl (best epoch) "
             "| s / epoch (median) |", "|---|---|---|---|---|---|---|"]
    for label, res in results.items():
        hist = res["history"]
        best = min(hist, key=lambda r: r["val_ppl"])
        secs = sorted(r["seconds"] for r in hist)[len(hist) // 2]
        test = res["metrics"].get("test_ppl")
        test_text = f"{test:.1f}" if test is not None and res["metrics"].get("best_epoch") == best["epoch"] else "-"
        recipe = " ".join([res["recipe"]] + res["overrides"])
        lines.append(f"| {label} | `{recipe}` | {len(hist)} | {best['epoch'] + 1} | {best['val_ppl']:.1f} | "
                     f"{test_text} | {secs:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

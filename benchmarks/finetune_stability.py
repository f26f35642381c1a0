"""The fine-tuning stability comparison (lnsr-noise-stability-bert.txt, Tables 1-3, Fig. 2) on clothing reviews.

Runs the seven shipped recipes (FT, FT+Noise, L2-SP, Mixout, SMART, R3F, LNSR) seed by seed, all methods for seed 0
before any method gets seed 1, so an interrupted or time-limited run leaves a balanced table. Every seed is a
resumable run directory (``runs/.../<recipe>/seed-<s>``): finished seeds are read back, so running again with a
larger ``--seeds`` only adds seeds. Seed 0 of FT and LNSR keeps ``best.pt`` for the noise-attenuation analysis.

    python benchmarks/finetune_stability.py --seeds 10 --out runs/ft-stability
    python benchmarks/finetune_stability.py --seeds 3 --out runs/ft-stability-rating --tag rating \\
        --set data.task=rating

writes ``docs/results/finetuning-stability-<tag>.{json,md,png}`` (mean, std, median, max, min, generalisation
gap, Welch and Mann-Whitney p-values against FT, box plot) from whatever seeds have finished.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch
import yaml

from embreg.recipes.finetune_builders import prepare_text
from embreg.recipes.finetune_run import FINISHED_KEY, load_finetune_recipe, run_finetune_single
from embreg.train.checkpoint import atomic_write_json
from embreg.train.stability import box_plot, stability_markdown
from embreg.train.stats import summarize_runs

METHODS = {"FT": "ft-reviews", "FT+Noise": "ft-reviews-noise", "L2-SP": "ft-reviews-l2sp",
           "Mixout": "ft-reviews-mixout", "SMART": "ft-reviews-smart", "R3F": "ft-reviews-r3f",
           "LNSR": "ft-reviews-lnsr"}
KEEP_BEST = {"FT", "LNSR"}
OUT = Path(__file__).resolve().parents[1] / "docs" / "results"


def _finished(seed_dir: Path) -> dict | None:
    path = seed_dir / "metrics.json"
    if not path.is_file():
        return None
    metrics = json.loads(path.read_text())
    return metrics if FINISHED_KEY in metrics else None


def _summaries(out: Path, methods: list[str]) -> dict[str, dict]:
    summaries = {}
    for method in methods:
        directory = out / METHODS[method]
        runs = sorted(directory.glob("seed-*"), key=lambda p: int(p.name.split("-")[1]))
        finished = [m for m in (_finished(r) for r in runs) if m is not None]
        if finished:
            summary = summarize_runs(finished)
            atomic_write_json(directory / "summary.json", summary)
            summaries[method] = summary
    return summaries


def run_seed_queue(out: Path, methods: list[str], seeds: int, overrides: list[str],
                   budget_minutes: float | None = None, method_overrides: dict[str, list[str]] | None = None,
                   first_seed: int = 0) -> bool:
    """Trains seed ``first_seed`` of every method, then the next, ... up to ``seeds - 1``, into
    ``out/<recipe>/seed-<s>``, skipping finished seeds.

    ``overrides`` apply to every recipe, ``method_overrides[method]`` to that method's only (after them). Two
    processes given disjoint seed ranges (``first_seed``) can fill one run directory side by side.
    Returns False when ``budget_minutes`` ran out before the queue was done (no new seed is started after it).
    """
    method_overrides = method_overrides or {}
    started = time.perf_counter()
    prepared = None
    for seed in range(first_seed, seeds):
        for method in methods:
            seed_dir = out / METHODS[method] / f"seed-{seed}"
            if _finished(seed_dir):
                continue
            if budget_minutes is not None and time.perf_counter() - started > 60 * budget_minutes:
                print(f"budget of {budget_minutes} min used; stopping before {method} seed {seed}")
                return False
            extra = [f"train.seed={seed}"]
            if seed == 0 and method in KEEP_BEST:
                extra.append("train.keep_checkpoints=best")
            cfg = load_finetune_recipe(METHODS[method], [*overrides, *method_overrides.get(method, []), *extra])
            if prepared is None:
                prepared = prepare_text(cfg)
            result = run_finetune_single(cfg, seed_dir, resume=True, prepared=prepared)
            m = result.metrics
            print(f"{method:9s} seed {seed}: " + "  ".join(f"{k}={m[k]:.4f}" for k in sorted(m)
                                                           if k.startswith("test_")) +
                  f"  ({m['wall_seconds']:.0f} s)", flush=True)
    return True


def parse_method_overrides(specs: list[str], methods: list[str]) -> dict[str, list[str]]:
    """``["LNSR:regularizer.args.sigma=0.2", ...]`` -> ``{"LNSR": ["regularizer.args.sigma=0.2"], ...}``."""
    parsed: dict[str, list[str]] = {}
    for spec in specs:
        method, sep, override = spec.partition(":")
        if not sep or "=" not in override:
            raise SystemExit(f"--method-set {spec!r}: expected METHOD:KEY=VALUE, e.g. LNSR:regularizer.args.sigma=0.2")
        if method not in methods:
            raise SystemExit(f"--method-set {spec!r}: method {method!r} is not one of the methods run {methods}")
        parsed.setdefault(method, []).append(override)
    return parsed


def _regularizer_as_run(directory: Path) -> dict:
    """The regulariser section of the first finished seed's saved config: what was run, not today's recipe."""
    for seed_dir in sorted(directory.glob("seed-*"), key=lambda p: int(p.name.split("-")[1])):
        if _finished(seed_dir) and (seed_dir / "config.yaml").is_file():
            return yaml.safe_load((seed_dir / "config.yaml").read_text())["regularizer"]
    return {}


def report(out: Path, methods: list[str], tag: str, command: str, overrides: list[str]) -> None:
    """Writes the table, box plot and raw summaries of every finished seed."""
    summaries = _summaries(out, methods)
    present = [m for m in methods if m in summaries]
    if "FT" not in present:
        print("no finished FT seed yet; nothing to report")
        return
    present = ["FT"] + [m for m in present if m != "FT"]
    dirs = [out / METHODS[m] for m in present]
    cfg = load_finetune_recipe(METHODS["FT"], overrides)
    metrics = ["test_accuracy", "test_mcc", "test_f1"] if cfg.task == "classification" else ["test_corr",
                                                                                            "test_pearson"]
    if cfg.data.task == "rating":
        metrics = ["test_accuracy", "test_macro_f1", "test_mcc"]
    sizes = json.loads((dirs[0] / "seed-0" / "split.json").read_text())["sizes"]
    machine = (f"{platform.machine()} CPU, 2 cores shared with other jobs, torch {torch.__version__}, "
               f"{cfg.train.threads} torch thread(s) per run, no GPU")
    lines = [f"# Fine-tuning stability: {tag}", "",
             f"Command: `{command}`  ", f"Machine: {machine}  ",
             f"Task: {cfg.data.dataset} / {cfg.data.task}, {sizes['train']} training examples, fixed "
             f"validation ({sizes['valid']}) and test ({sizes['test']}) sets (split seed "
             f"{cfg.data.split_seed}, subset seed {cfg.data.subset_seed}), max {cfg.data.max_length} tokens; "
             f"all-MiniLM-L6-v2, {cfg.train.epochs} epochs, batch {cfg.train.batch_size}, lr {cfg.train.lr}, "
             f"best epoch by {cfg.monitor[0]}. Seeds: train.seed = 0, 1, ... (head initialisation, batch order, "
             "dropout, noise).", ""]
    for metric in metrics:
        lines += [f"## {metric}", "", stability_markdown(dirs, metric, names=present)]
    seconds = {m: summaries[m]["wall_seconds"]["mean"] for m in present}
    per_step = {m: summaries[m]["seconds_per_step"]["median"] for m in present}
    lines += ["## time per run (mean wall seconds, including evaluation) and per training step (median)", "",
              "| run | wall s / seed | s / step | ratio to FT |", "|---|---:|---:|---:|"]
    lines += [f"| {m} | {seconds[m]:.0f} | {per_step[m]:.2f} | {per_step[m] / per_step['FT']:.2f} |" for m in present]
    lines += ["", "Step times come from runs sharing a loaded machine; the controlled cost comparison is "
              "`finetuning-stability-cost.md`.", ""]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"finetuning-stability-{tag}.md").write_text("\n".join(lines))
    box_plot(dirs, metrics[0], OUT / f"finetuning-stability-{tag}.png", names=present,
             title=f"{cfg.data.dataset}/{cfg.data.task}, {sizes['train']} training examples: {metrics[0]} per seed")
    record = {"command": command, "machine": machine, "overrides": overrides,
              "recipes": {m: METHODS[m] for m in present},
              "regularizers": {m: _regularizer_as_run(out / METHODS[m]) for m in present},
              "summaries": summaries}
    (OUT / f"finetuning-stability-{tag}.json").write_text(json.dumps(record, indent=2) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", default="runs/ft-stability")
    parser.add_argument("--tag", default="binary", help="name of the results files")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override every recipe")
    parser.add_argument("--method-set", action="append", default=[], metavar="METHOD:KEY=VALUE",
                        help="override one method's recipe, e.g. LNSR:regularizer.args.sigma=0.2")
    parser.add_argument("--report-only", action="store_true", help="only rebuild the tables from finished seeds")
    parser.add_argument("--budget-minutes", type=float, default=None, help="start no new seed after this long")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="train seeds first-seed .. seeds-1 only (a second process can take another range)")
    args = parser.parse_args()
    methods = args.methods.split(",")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {list(METHODS)}")
    out = Path(args.out)
    # the command that makes the results: --report-only only rebuilds them from the seeds that finished
    command = "python benchmarks/finetune_stability.py " + " ".join(a for a in sys.argv[1:] if a != "--report-only")
    if not args.report_only:
        run_seed_queue(out, methods, args.seeds, args.set, args.budget_minutes,
                       parse_method_overrides(args.method_set, methods), args.first_seed)
    report(out, methods, args.tag, command, args.set)


if __name__ == "__main__":
    main()

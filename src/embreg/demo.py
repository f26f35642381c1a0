"""``embreg demo``: what the techniques buy on real MovieLens-100k data, with their cost and p-values, in minutes.

Two comparisons, each technique against its tuned baseline on the same split, several seeds each:

* implicit feedback: BPR vs SSE-SE + BPR (sse-stochastic-shared-embeddings.txt, Table 1: SSE helps BPR);
* explicit ratings: MF vs Dropout + MF and SSE-SE + MF (Table 1 reports SSE helping MF; on ML-100k it does not).

For every technique the table gives the test metrics (mean ± std over seeds), Welch's p-value against the
baseline, the verdict (better / worse / no significant difference at the 5% level) and the cost: training time per
example relative to the baseline's, timed in one process after training, the recipes' steps interleaved (median
of rounds), so the figure does not depend on what else ran while the seeds trained. Seeds train two at a time (one
thread each) on a two-core machine.

Example:
    >>> [c.baseline for c in COMPARISONS]
    ['bpr', 'mf']
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from dataclasses import dataclass
from pathlib import Path

from embreg.analysis.compare import compare_runs
from embreg.analysis.stats import summarize

__all__ = ["Comparison", "COMPARISONS", "run_demo", "step_costs"]


@dataclass(frozen=True)
class Comparison:
    """A baseline recipe, the technique recipes compared with it, and the metrics shown (the first decides)."""

    title: str
    baseline: str
    techniques: tuple[str, ...]
    metrics: tuple[str, ...]


COMPARISONS = (
    Comparison(
        "Implicit feedback: BPR on MovieLens-100k (per-user 80/10/10 split)",
        "bpr",
        ("bpr-sse-se",),
        ("test_precision@1", "test_ndcg@10"),
    ),
    Comparison(
        "Explicit ratings: MF on MovieLens-100k (random 80/10/10 split)",
        "mf",
        ("mf-dropout", "mf-sse-se"),
        ("test_rmse", "test_mae"),
    ),
)


def _train(recipe: str, seed_dir: str, seed: int) -> dict:
    from embreg.recipes import load_recipe
    from embreg.recipes.run import run_single

    overrides = [f"train.seed={seed}", "train.progress=false", "train.threads=1", "train.keep_checkpoints=none"]
    return run_single(load_recipe(recipe, overrides), seed_dir).metrics


def run_demo(out: Path, seeds: int = 5, workers: int = 2, echo=print, *, overwrite: bool = False) -> str:
    """Trains every recipe of :data:`COMPARISONS` for ``seeds`` seeds into ``out/<recipe>/seed-<s>`` and returns
    the markdown tables (also written to ``out/demo.md``).

    Raises:
        RunDirectoryInUseError: ``out`` holds an earlier demo and ``overwrite`` is false (nothing is trained).
        OutputPathError: ``out`` is a file or lies below one (nothing is trained).
    """
    _claim_demo_dir(out, overwrite)
    jobs = [(recipe, seed) for c in COMPARISONS for recipe in (c.baseline, *c.techniques) for seed in range(seeds)]
    echo(f"training {len({r for r, _ in jobs})} recipes x {seeds} seeds = {len(jobs)} runs, {workers} at a time ...")
    metrics: dict[str, list[dict]] = {}
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {
            pool.submit(_train, recipe, str(out / recipe / f"seed-{seed}"), seed): (recipe, seed)
            for recipe, seed in jobs
        }
        for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
            recipe, seed = futures[future]
            metrics.setdefault(recipe, []).append(future.result())
            echo(f"  [{done}/{len(jobs)}] {recipe} seed {seed}")
    echo("timing one training step of each recipe (interleaved rounds) ...")
    costs = {recipe: cost for c in COMPARISONS for recipe, cost in step_costs((c.baseline, *c.techniques)).items()}
    sections = [_section(c, out, metrics, costs) for c in COMPARISONS]
    text = "\n\n".join(sections) + "\n"
    (out / "demo.md").write_text(text)
    return text


def step_costs(
    recipes: tuple[str, ...] | dict[str, tuple[str, list[str]]], rounds: int = 15, steps: int = 10
) -> dict[str, float]:
    """Median seconds per training example of each recipe, its steps timed in interleaved rounds in this process.

    Each recipe is built as it trains (its batch size, its techniques), warmed up for ``steps`` steps, then timed
    for ``rounds`` rounds of ``steps`` steps, the recipes taking turns in every round.

    Args:
        recipes: shipped recipe names, or ``{label: (recipe, overrides)}``; all of one task (the data is shared).
    """
    import time

    import torch

    from embreg.batching.batches import endless_batches
    from embreg.recipes import load_recipe
    from embreg.recipes.run import build_run

    runs = recipes if isinstance(recipes, dict) else {name: (name, []) for name in recipes}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainers, sources, sizes = {}, {}, {}
        prepared = None
        for label, (name, overrides) in runs.items():
            recipe = load_recipe(name, [*overrides, "train.progress=false", "train.threads=1"])
            built = build_run(recipe, prepared)
            prepared = built.prepared  # one task per comparison: the data is shared
            trainers[label] = built.trainer(None)
            sources[label] = endless_batches(built.batches)
            sizes[label] = recipe.train.batch_size
        timings: dict[str, list[float]] = {label: [] for label in runs}
        for round_index in range(rounds + 1):
            for label in runs:
                trainer = trainers[label]
                trainer.model.train()
                started = time.perf_counter()
                for _ in range(steps):
                    trainer._train_step(next(sources[label]), 0)  # noqa: SLF001 - the trainer's own step
                if round_index:  # round 0 warms up
                    timings[label].append((time.perf_counter() - started) / (steps * sizes[label]))
    finally:
        torch.set_num_threads(threads)
    return {label: summarize(values)["median"] for label, values in timings.items()}


def _section(comparison: Comparison, out: Path, metrics: dict[str, list[dict]], costs: dict[str, float]) -> str:
    recipes = (comparison.baseline, *comparison.techniques)
    result = compare_runs([_summary_dir(out, r, metrics[r]) for r in recipes], metrics=list(comparison.metrics))
    decide = comparison.metrics[0]
    lower = decide.endswith(("rmse", "mae"))
    header = " | ".join(["recipe", *comparison.metrics, f"p ({decide})", "verdict", "time per example"])
    lines = [f"### {comparison.title}", "", f"| {header} |", "|" + "---|" * (len(comparison.metrics) + 4)]
    for row in result.rows:
        cells = [row.name]
        for metric in comparison.metrics:
            s = row.metrics.get(metric)
            cells.append(f"{s.mean:.4f} ± {s.std:.4f}" if s is not None else "—")
        cost = costs[row.name] / costs[comparison.baseline]
        if row.name == comparison.baseline:
            cells += ["", "baseline", "1.00x"]
        else:
            p = row.p_values[decide].welch
            delta = row.metrics[decide].mean - result.rows[0].metrics[decide].mean
            better = delta < 0 if lower else delta > 0
            verdict = "no significant difference" if not p < 0.05 else "better" if better else "worse"
            cells += [f"{p:.3g}", verdict, f"{cost:.2f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    n = len(metrics[comparison.baseline])
    lines += [
        "",
        f"{n} seeds per recipe; test metrics at the best validation epoch; Welch's two-sided t-test "
        "against the baseline; time per training example relative to the baseline (each recipe at its own "
        "batch size; median of 15 interleaved rounds, one thread).",
    ]
    return "\n".join(lines)


def _claim_demo_dir(out: Path, overwrite: bool) -> None:
    """Refuses an ``out`` that holds an earlier demo's files, or deletes them first with ``overwrite``; refuses an
    ``out`` that is a file or lies below one (:func:`~embreg.runs.output_paths.check_output_directory`).

    Only the demo's own entries (``demo.md`` and one folder per recipe of :data:`COMPARISONS`) count and are deleted.
    """
    import shutil

    from embreg.runs.output_paths import check_output_directory
    from embreg.runs.run_dir import RunDirectoryInUseError

    check_output_directory(out, "demo directory")
    recipes = [recipe for c in COMPARISONS for recipe in (c.baseline, *c.techniques)]
    there = [path for path in (out / "demo.md", *(out / recipe for recipe in recipes)) if path.exists()]
    if not there:
        return
    if not overwrite:
        names = ", ".join(path.name for path in there)
        raise RunDirectoryInUseError(
            f"{out} holds an earlier demo ({names}): choose another --out, or pass --overwrite to delete it first"
        )
    for path in there:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


def _summary_dir(out: Path, recipe: str, runs: list[dict]) -> Path:
    """Writes the per-seed metrics as ``summary.json`` so :func:`compare_runs` reads them."""
    from embreg.analysis.stats import summarize_runs
    from embreg.runs.checkpoint import atomic_write_json

    directory = out / recipe
    atomic_write_json(directory / "summary.json", summarize_runs(runs))
    return directory

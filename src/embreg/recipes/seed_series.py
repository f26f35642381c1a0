"""Running one recipe over several training seeds: the loop, the summary and its report, shared by every family.

Each seed ``train.seed + i`` trains into ``out_dir/seed-<seed>``; ``summary.json`` (mean, std, median, min, max
and the raw values of every metric, :func:`embreg.analysis.stats.summarize_runs`) is rewritten after every seed, so a
partial run has a summary too. ``config.yaml`` and ``run.json`` (layout ``seeds``, world size) are written first,
``report.md`` at the end; whether the directory may be written at all is the caller's check
(:func:`embreg.recipes.run.run_seeds`).

Example:
    >>> from embreg.recipes import load_recipe
    >>> from embreg.recipes.run import run_single
    >>> cfg = load_recipe("mf", ["train.epochs=1"])
    >>> # run_seed_series(cfg, "runs/mf-3", 3, lambda c, d: run_single(c, d))   # three seeds, ~10 s
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from embreg.analysis.stats import summarize_runs
from embreg.config import to_dict
from embreg.recipes.resume_check import run_record
from embreg.runs.run_dir import RunDirectory
from embreg.train.distributed import current
from embreg.train.trainer import FitResult

__all__ = ["run_seed_series", "summary_report"]


def run_seed_series(
    cfg: Any, out_dir: str | Path, seeds: int, run_one: Callable[[Any, Path], FitResult]
) -> dict[str, dict]:
    """Runs ``seeds`` copies of ``cfg`` with seeds ``train.seed + i``; returns and writes the summary.

    Args:
        cfg: a recipe config with ``name``, ``description`` and ``train.seed``.
        out_dir: the directory for ``seed-<s>/`` sub-directories, ``summary.json``, ``report.md``, ``config.yaml``,
            ``run.json``.
        seeds: number of seeds, >= 1.
        run_one: trains one seed's config into its directory (resume and shared data are its business).
    """
    if seeds < 1:
        raise ValueError(f"seeds={seeds} must be >= 1")
    out = RunDirectory(out_dir)
    env = current()
    writes = env.is_main  # under DDP rank 0 alone writes
    if writes:
        out.write_config(to_dict(cfg))
        out.write_run_record(run_record("seeds", env.world_size))
    metrics = []
    summary: dict[str, dict] = {}
    for i in range(seeds):
        seed_cfg = copy.deepcopy(cfg)
        seed_cfg.train.seed = cfg.train.seed + i
        metrics.append(run_one(seed_cfg, out.seed(seed_cfg.train.seed).path).metrics)
        summary = summarize_runs(metrics)
        if writes:
            out.write_summary(summary)
    if writes:
        out.write_report(summary_report(cfg.name, cfg.description, summary, seeds))
    return summary


def summary_report(name: str, description: str, summary: dict[str, dict], seeds: int) -> str:
    """Markdown table of mean ± std, median, min and max per metric."""
    rows = "\n".join(
        f"| {k} | {s['mean']:.4f} ± {s['std']:.4f} | {s['median']:.4f} | {s['min']:.4f} | {s['max']:.4f} |"
        for k, s in summary.items()
    )
    return (
        f"# {name} over {seeds} seeds\n\n{description}\n\n"
        f"| metric | mean ± std | median | min | max |\n|---|---|---|---|---|\n{rows}\n\n"
        "raw values: `summary.json`\n"
    )

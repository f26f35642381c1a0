"""Loading and running fine-tuning recipes: one seed into one run directory, or many seeds with a summary.

A seed's directory gets ``config.yaml``, ``split.json``, ``history.jsonl``, ``metrics.json`` (validation and test
metrics at the best epoch, the training-set metrics of that model, the generalisation gaps
``gap_<m> = train_<m> - test_<m>`` and the timings) and ``report.md``. Checkpoints (``last.pt``) let an
interrupted seed continue with ``resume``; a finished seed is recognised by its ``metrics.json`` and skipped, so
``embreg run RECIPE --seeds 25 --resume --out DIR`` adds seeds to an earlier 10-seed run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import yaml

from embreg.config import apply_overrides, from_dict, load_yaml, to_dict
from embreg.recipes.finetune_builders import (
    PreparedText,
    build_classifier,
    build_regularizers,
    build_text_batches,
    build_text_evaluator,
    prepare_text,
)
from embreg.recipes.finetune_schema import FinetuneRecipeConfig
from embreg.recipes.registry import recipe_path
from embreg.recipes.seed_series import run_seed_series
from embreg.train.checkpoint import atomic_write_json, atomic_write_text
from embreg.train.seeding import seed_everything
from embreg.train.trainer import BEST_CHECKPOINT, LAST_CHECKPOINT, FitResult, Trainer
from embreg.train.warmup import warmup_adamw_factory

__all__ = ["is_finetune_recipe", "load_finetune_recipe", "run_finetune_single", "run_finetune_seeds",
           "FINISHED_KEY"]

FINETUNE_TASKS = ("classification", "regression")
FINISHED_KEY = "wall_seconds"
"""A seed's ``metrics.json`` holds this key once the runner has finished it (the trainer's own file does not)."""


def is_finetune_recipe(name_or_path: str | Path) -> bool:
    """Whether the recipe (shipped name or YAML path) declares ``task: classification`` or ``regression``."""
    return load_yaml(recipe_path(name_or_path)).get("task") in FINETUNE_TASKS


def load_finetune_recipe(name_or_path: str | Path, overrides: Sequence[str] = ()) -> FinetuneRecipeConfig:
    """Loads a fine-tuning recipe by name or path and applies ``key=value`` overrides.

    Example:
        >>> cfg = load_finetune_recipe("ft-reviews-lnsr", ["regularizer.args.sigma=0.05"])
        >>> cfg.regularizer.name, cfg.regularizer.args["sigma"]
        ('lnsr', 0.05)
    """
    data = apply_overrides(load_yaml(recipe_path(name_or_path)), list(overrides))
    return from_dict(FinetuneRecipeConfig, data)


def _finished(run_dir: Path | None) -> dict[str, Any] | None:
    if run_dir is None or not (run_dir / "metrics.json").is_file():
        return None
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return metrics if FINISHED_KEY in metrics else None


def run_finetune_single(cfg: FinetuneRecipeConfig, out_dir: str | Path | None, *, resume: bool = False,
                        prepared: PreparedText | None = None) -> FitResult:
    """Fine-tunes once with ``cfg.train.seed``; see the module docstring for what ``out_dir`` receives.

    Args:
        cfg: the recipe.
        out_dir: the run directory (``None``: keep nothing on disk).
        resume: continue an interrupted run in ``out_dir``; a finished one is returned as it is.
        prepared: the tokenised task, to share it between seeds (built from ``cfg`` when ``None``).
    """
    run_dir = Path(out_dir) if out_dir is not None else None
    done = _finished(run_dir) if resume else None
    if done is not None:
        history_file = run_dir / "history.jsonl"
        history = [json.loads(line) for line in history_file.read_text().splitlines()] if history_file.exists() else []
        return FitResult(metrics=done, history=history)
    t = cfg.train
    if t.threads is not None:
        torch.set_num_threads(t.threads)
    prepared = prepared if prepared is not None else prepare_text(cfg)
    seed_everything(t.seed)
    model = build_classifier(cfg, prepared.task)
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
        atomic_write_json(run_dir / "split.json", prepared.task.record | {"task_name": prepared.task.name})
    batches = build_text_batches(cfg, prepared)
    evaluator = build_text_evaluator(cfg, prepared)
    monitor, mode = cfg.monitor
    trainer = Trainer(model, warmup_adamw_factory(t.lr, t.epochs * len(batches), t.warmup, t.weight_decay), batches,
                      evaluator, epochs=t.epochs, monitor=monitor, mode=mode, patience=t.patience,
                      clip_norm=t.clip_norm, regularizers=build_regularizers(cfg), run_dir=run_dir,
                      progress=t.progress)
    started = time.perf_counter()
    result = trainer.fit(resume=resume)
    metrics = dict(result.metrics)
    for name, value in evaluator(trainer.model, "train").items():
        metrics[f"train_{name}"] = value
        if f"test_{name}" in metrics:
            metrics[f"gap_{name}"] = value - metrics[f"test_{name}"]
    steps = len(batches) * len(result.history)
    train_seconds = sum(record["seconds"] for record in result.history)
    metrics.update(train_seconds=train_seconds, seconds_per_step=train_seconds / max(steps, 1),
                   wall_seconds=time.perf_counter() - started)
    if run_dir is not None:
        atomic_write_json(run_dir / "metrics.json", metrics)
        atomic_write_text(run_dir / "report.md", _report(cfg, metrics))
        dropped = {"none": (LAST_CHECKPOINT, BEST_CHECKPOINT), "best": (LAST_CHECKPOINT,), "all": ()}
        for name in dropped[t.keep_checkpoints]:
            (run_dir / name).unlink(missing_ok=True)
    return FitResult(metrics=metrics, history=result.history)


def run_finetune_seeds(cfg: FinetuneRecipeConfig, out_dir: str | Path, seeds: int, *, resume: bool = False
                       ) -> dict[str, dict]:
    """Runs seeds ``train.seed .. train.seed + seeds - 1`` into ``out_dir/seed-<s>``; writes ``summary.json``.

    The task is tokenised once. With ``resume`` finished seeds are read back rather than trained again, so a
    larger ``seeds`` extends an earlier run.
    """
    prepared: list[PreparedText] = []  # tokenised on the first seed that trains

    def run_one(seed_cfg: FinetuneRecipeConfig, seed_dir: Path) -> FitResult:
        if not prepared and not (resume and _finished(seed_dir)):
            prepared.append(prepare_text(cfg))
        return run_finetune_single(seed_cfg, seed_dir, resume=resume, prepared=prepared[0] if prepared else None)

    return run_seed_series(cfg, out_dir, seeds, run_one)


def _report(cfg: FinetuneRecipeConfig, metrics: dict[str, float]) -> str:
    rows = "\n".join(f"| {k} | {v:.4f} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in metrics.items())
    return (f"# {cfg.name}\n\n{cfg.description}\n\nregularizer `{cfg.regularizer.name}` {cfg.regularizer.args}, "
            f"seed {cfg.train.seed}, split seed {cfg.data.split_seed}, subset seed {cfg.data.subset_seed}\n\n"
            f"| metric | value |\n|---|---|\n{rows}\n")

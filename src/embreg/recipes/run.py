"""Running a recipe: one seed into one run directory, or several seeds with a summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from embreg.config import to_dict
from embreg.recipes.builders import build_batches, build_evaluator, build_model, prepare_data
from embreg.recipes.seed_series import run_seed_series
from embreg.recipes.trainer_setup import build_trainer
from embreg.recipes.schema import RecipeConfig
from embreg.train.checkpoint import atomic_write_json, atomic_write_text
from embreg.train.seeding import seed_everything
from embreg.train.trainer import FitResult


def run_single(cfg: RecipeConfig, out_dir: str | Path | None, *, resume: bool = False) -> FitResult:
    """Trains ``cfg`` once; writes config, split record, history, checkpoints, metrics and report to ``out_dir``."""
    if cfg.train.threads is not None:
        torch.set_num_threads(cfg.train.threads)
    seed_everything(cfg.train.seed)
    data = prepare_data(cfg)
    run_dir = Path(out_dir) if out_dir is not None else None
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
        _write_split_record(run_dir, cfg, data.split)
    model = build_model(cfg, data)
    t = cfg.train
    trainer = build_trainer(t, cfg.monitor, model, build_batches(cfg, data), build_evaluator(cfg, data),
                            run_dir=run_dir, eval_train=t.eval_train and cfg.task == "rating")
    result = trainer.fit(resume=resume)
    if run_dir is not None:
        atomic_write_text(run_dir / "report.md", _report(cfg, result.metrics))
    return result


def run_seeds(cfg: RecipeConfig, out_dir: str | Path, seeds: int, *, resume: bool = False) -> dict[str, dict]:
    """Runs ``seeds`` training seeds (``train.seed + i``) on the same split; writes ``summary.json``.

    Each seed goes to ``out_dir/seed-<seed>``; the summary holds mean, std, median, min, max and values for
    every metric (see :func:`embreg.recipes.seed_series.run_seed_series`).
    """
    return run_seed_series(cfg, out_dir, seeds, lambda seed_cfg, seed_dir: run_single(seed_cfg, seed_dir, resume=resume))


def _write_split_record(run_dir: Path, cfg: RecipeConfig, split: dict[str, np.ndarray]) -> None:
    record = {
        "split_seed": cfg.data.split_seed,
        "fractions": cfg.data.split,
        "kind": "per-user" if cfg.task == "ranking" else "random",
        "sizes": {name: int(idx.size) for name, idx in split.items()},
    }
    atomic_write_json(run_dir / "split.json", record)


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _report(cfg: RecipeConfig, metrics: dict[str, float]) -> str:
    rows = "\n".join(f"| {k} | {_fmt(v)} |" for k, v in metrics.items())
    return (f"# {cfg.name}\n\n{cfg.description}\n\nseed {cfg.train.seed}, split seed {cfg.data.split_seed}\n\n"
            f"| metric | value |\n|---|---|\n{rows}\n\nconfig: `config.yaml`, per-epoch history: `history.jsonl`\n")


def load_metrics(run_dir: str | Path) -> dict[str, Any]:
    """The ``metrics.json`` of a finished single-seed run."""
    return json.loads((Path(run_dir) / "metrics.json").read_text())

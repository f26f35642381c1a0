"""Loading and running language-model recipes (``task: lm``): one seed into one run directory, or several."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
import yaml

from embreg.config import apply_overrides, from_dict, load_yaml, to_dict
from embreg.recipes.lm_builders import (
    build_lm,
    build_lm_batches,
    build_lm_evaluator,
    build_update_rule,
    load_corpus,
)
from embreg.recipes.lm_schema import LMRecipeConfig
from embreg.recipes.registry import recipe_path
from embreg.recipes.seed_series import run_seed_series
from embreg.recipes.trainer_setup import build_trainer
from embreg.train.checkpoint import atomic_write_json, atomic_write_text
from embreg.train.seeding import seed_everything
from embreg.train.trainer import FitResult


def is_lm_recipe(name_or_path: str | Path) -> bool:
    """Whether the recipe (shipped name or YAML path) declares ``task: lm``."""
    return load_yaml(recipe_path(name_or_path)).get("task") == "lm"


def load_lm_recipe(name_or_path: str | Path, overrides: Sequence[str] = ()) -> LMRecipeConfig:
    """Loads an LM recipe by name or path and applies ``key=value`` overrides.

    Example:
        >>> cfg = load_lm_recipe("lm-dropout", ["technique.name=explicit_xi"])
        >>> cfg.technique.name, cfg.monitor
        ('explicit_xi', ('val_ppl', 'min'))
    """
    data = apply_overrides(load_yaml(recipe_path(name_or_path)), list(overrides))
    return from_dict(LMRecipeConfig, data)


def run_lm_single(cfg: LMRecipeConfig, out_dir: str | Path | None, *, resume: bool = False) -> FitResult:
    """Trains ``cfg`` once; writes config, corpus record, history, checkpoints, metrics and report to ``out_dir``.

    With ``resume`` an interrupted run continues from ``out_dir/last.pt`` (a larger ``train.epochs`` extends a
    finished one).
    """
    t = cfg.train
    if t.threads is not None:
        torch.set_num_threads(t.threads)
    seed_everything(t.seed)
    corpus = load_corpus(cfg)
    model = build_lm(cfg, len(corpus.vocab))
    rule = build_update_rule(cfg)
    run_dir = Path(out_dir) if out_dir is not None else None
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
        record = corpus.summary()
        record.update(split_seed=cfg.data.split_seed, fractions=cfg.data.split,
                      articles={k: v for k, v in corpus.articles.items()})
        atomic_write_json(run_dir / "corpus.json", record)
    trainer = build_trainer(t, cfg.monitor, model, build_lm_batches(cfg, corpus), build_lm_evaluator(cfg, corpus),
                            run_dir=run_dir, regularizers=rule.regularizers, objective=rule.objective)
    result = trainer.fit(resume=resume)
    if run_dir is not None:
        atomic_write_text(run_dir / "report.md", _report(cfg, result))
    return result


def run_lm_seeds(cfg: LMRecipeConfig, out_dir: str | Path, seeds: int, *, resume: bool = False) -> dict:
    """Runs ``seeds`` training seeds into ``out_dir/seed-<s>`` and writes ``summary.json``."""
    return run_seed_series(cfg, out_dir, seeds, lambda seed_cfg, seed_dir: run_lm_single(seed_cfg, seed_dir, resume=resume))


def _report(cfg: LMRecipeConfig, result: FitResult) -> str:
    m = result.metrics
    rows = "\n".join(f"| {k} | {v:.4f} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in m.items())
    secs = [r["seconds"] for r in result.history]
    pace = f"{sum(secs) / len(secs):.1f} s per epoch" if secs else "no epoch run"
    return (f"# {cfg.name}\n\n{cfg.description}\n\ntechnique `{cfg.technique.name}`, seed {cfg.train.seed}, "
            f"split seed {cfg.data.split_seed}, {pace}\n\n| metric | value |\n|---|---|\n{rows}\n\n"
            "config: `config.yaml`, corpus and split: `corpus.json`, per-epoch history: `history.jsonl`\n")

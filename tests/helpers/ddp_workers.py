"""What each rank runs in tests/train/test_distributed.py (module-level functions: spawned ranks import them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from embreg.recipes import load_recipe
from embreg.recipes.run import build_run, run_single
from embreg.registry import REGISTRY
from embreg.sse.base import IndexTransform
from embreg.train.distributed import current
from tests.helpers.recipes import base_recipe


def _watch_writes(root: Path) -> list[str]:
    """The paths under ``root`` this process opens for writing from now on (an audit hook: it sees every open)."""
    written: list[str] = []
    prefix = str(root.resolve())

    def hook(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], str) and str(args[1]) not in ("r", "rb", "None"):
            if str(Path(args[0]).resolve()).startswith(prefix) and not args[0].endswith(".lock"):
                written.append(args[0])
        elif event == "os.rename" and str(args[1]).startswith(prefix):
            written.append(str(args[1]))

    sys.addaudithook(hook)
    return written


def family_overrides(model: str, tiny_encoder: str | None) -> tuple[str, list[str]]:
    """The plainest shipped recipe of ``model`` and the overrides that shrink it to a smoke run."""
    name = base_recipe(model)
    assert name is not None, f"model {model!r} has no shipped recipe"
    overrides = list(load_recipe(name).adapter.smoke_overrides) + ["train.epochs=2", "train.threads=1"]
    if "pretrained" in REGISTRY.get("model", model).provides:
        overrides.append(f"model.pretrained={tiny_encoder}")
    return name, overrides


def train_every_family(root: str, tiny_encoder: str | None) -> dict[str, Any]:
    """Trains every model family's smoke recipe into ``root/<family>``; returns metrics and what this rank wrote."""
    written = _watch_writes(Path(root))
    metrics = {}
    for model in REGISTRY.names("model"):
        name, overrides = family_overrides(model, tiny_encoder)
        metrics[model] = run_single(load_recipe(name, overrides), Path(root) / model).metrics
    # techniques that run the model outside DDP's forward (LNSR's noisy pass) or twice in a step (Dropout_k)
    extra = {"ft-reviews-lnsr": ["regularizers.0.start_layer=1"], "lm-dropout-k": []}  # the tiny BERT has 2 layers
    for recipe, model in (("ft-reviews-lnsr", "encoder-classifier"), ("lm-dropout-k", "lstm-lm")):
        _, overrides = family_overrides(model, tiny_encoder)
        metrics[recipe] = run_single(load_recipe(recipe, overrides + extra[recipe]), Path(root) / recipe).metrics
    return {"metrics": metrics, "written": written}


def streams(recipe: str, overrides: list[str]) -> dict[str, Any]:
    """This rank's shard and random draws right after its trainer is built: the transforms' rank offsets, one SSE
    draw per transform on the same ids, the first batch's negatives and a dropout-like global draw."""
    built = build_run(load_recipe(recipe, overrides))
    trainer = built.trainer(None)
    transforms = {n: m for n, m in trainer.model.named_modules() if isinstance(m, IndexTransform)}
    draws = {}
    for name, module in transforms.items():
        module.train()
        draws[name] = module(torch.arange(module.num_embeddings).repeat(4)).tolist()
    batch = next(iter(trainer.batches.epoch(0)))
    return {
        "rank": current().rank,
        "shard": (trainer.batches.rank, trainer.batches.world_size, len(trainer.batches)),
        "offsets": {n: m.rank_offset for n, m in transforms.items()},
        "draws": draws,
        "negatives": batch.get("neg", torch.zeros(0)).tolist(),
        "global": torch.rand(8).tolist(),
        "ddp": type(trainer._step_model).__name__,
    }


def resume_equals_uninterrupted(root: str, recipe: str, overrides: list[str]) -> dict[str, Any]:
    """Trains 3 epochs straight into ``root/full``; 1 epoch into ``root/part``, then resumes it to 3 epochs."""
    full = run_single(load_recipe(recipe, overrides + ["train.epochs=3"]), Path(root) / "full")
    part = Path(root) / "part"
    run_single(load_recipe(recipe, overrides + ["train.epochs=1"]), part)
    if current().is_main:  # a larger epoch budget on an unfinished directory continues, as after a kill
        (part / "metrics.json").unlink()
    dist.barrier()
    resumed = run_single(load_recipe(recipe, overrides + ["train.epochs=3"]), part, resume=True)
    strip = ("seconds", "train_seconds", "seconds_per_step", "wall_seconds")
    history = (
        [json.loads(line) for line in (part / "history.jsonl").read_text().splitlines()] if current().is_main else []
    )
    return {
        "full": {k: v for k, v in full.metrics.items() if k not in strip},
        "resumed": {k: v for k, v in resumed.metrics.items() if k not in strip},
        "full_losses": [r["train_loss"] for r in full.history],
        "resumed_losses": [r["train_loss"] for r in resumed.history],
        "history_epochs": [r["epoch"] for r in history],
    }


def _error_of_a_tiny_run(model: torch.nn.Module, regularizers: list[Any] = ()) -> str:
    """Trains ``model`` (a BiasedMF over 8 users and 5 items) one epoch; returns the TrainingError it raises."""
    from embreg.batching.batches import TensorBatches
    from embreg.errors import TrainingError
    from embreg.optim.optimizers import optimizer_factory
    from embreg.tasks.ratings.evaluation import RatingEvaluator
    from embreg.train.trainer import Trainer

    data = {"user": torch.arange(64) % 8, "item": torch.arange(64) % 5, "rating": torch.ones(64)}
    trainer = Trainer(
        model,
        optimizer_factory("sgd", 0.1),
        TensorBatches(data, 8),
        RatingEvaluator({"valid": data}),
        epochs=1,
        progress=False,
        test_split=None,
        regularizers=regularizers,
    )
    try:
        trainer.fit()
    except TrainingError as error:
        return str(error)
    return "no error"


def unused_parameter_error() -> str:
    """Trains a model with a parameter no loss uses; returns the error message the trainer raises."""
    from embreg.models import BiasedMF

    model = BiasedMF.build(8, 5, 4, global_mean=3.0)
    model.register_parameter("orphan", torch.nn.Parameter(torch.zeros(3)))
    return _error_of_a_tiny_run(model)


def non_finite_loss_on_one_rank() -> str:
    """Rank 1's loss turns NaN at its second step; returns the error this rank raises ("no error" if none)."""
    from embreg.models import BiasedMF

    class NaNOnRankOne:
        def penalty(self, ctx):
            return torch.tensor(float("nan") if dist.get_rank() == 1 and ctx.step == 1 else 0.0)

    return _error_of_a_tiny_run(BiasedMF.build(8, 5, 4, global_mean=3.0), [NaNOnRankOne()])

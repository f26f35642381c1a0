"""A tiny MF trainer on the synthetic ratings fixture, for tests of the trainer's resume and failure paths."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from embreg.batching.batches import TensorBatches
from embreg.models import BiasedMF
from embreg.optim.optimizers import optimizer_factory
from embreg.regularizers.base import standard_objective
from embreg.tasks.ratings.evaluation import RatingEvaluator
from embreg.train.seeding import seed_everything
from embreg.train.trainer import Trainer


def tiny_mf_trainer(
    data: dict[str, Any],
    run_dir: Path | None,
    *,
    epochs: int = 2,
    dim: int = 4,
    batch_size: int = 64,
    objective: Any = standard_objective,
) -> Trainer:
    """A seeded :class:`~embreg.models.BiasedMF` (30 users, 40 items, ``dim``) trainer with Adam, validated and
    tested on ``data`` itself (the ``synthetic_ratings`` fixture of tests/conftest.py)."""
    seed_everything(0)
    evaluator = RatingEvaluator({"valid": data, "test": data}, rating_range=(1.0, 5.0))
    return Trainer(
        BiasedMF.build(30, 40, dim, global_mean=3.0),
        optimizer_factory("adam", 0.01),
        TensorBatches(data, batch_size, seed=0),
        evaluator,
        epochs=epochs,
        run_dir=run_dir,
        objective=objective,
        progress=False,
    )


def poison_last_step(monkeypatch: Any) -> None:
    """After a run's very last optimizer step a weight becomes NaN (no later step would see it in a loss)."""
    step = Trainer._step_on_device

    def poisoned(self: Trainer, batch: Any, epoch: int) -> Any:
        result = step(self, batch, epoch)
        if self.step == self.epochs * len(self.batches):
            with torch.no_grad():
                next(self.model.parameters()).fill_(math.nan)
        return result

    monkeypatch.setattr(Trainer, "_step_on_device", poisoned)

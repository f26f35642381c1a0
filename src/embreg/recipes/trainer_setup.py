"""The :class:`~embreg.train.trainer.Trainer` of a recipe's ``train`` section, shared by the recipe runners.

Example:
    >>> from embreg.recipes import load_recipe
    >>> cfg = load_recipe("mf")
    >>> # trainer = build_trainer(cfg.train, cfg.monitor, model, batches, evaluator, run_dir=None)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from embreg.train.optim import optimizer_factory
from embreg.train.trainer import Trainer

__all__ = ["build_trainer"]


def build_trainer(
    train: Any, monitor: tuple[str, str], model: nn.Module, batches: Any, evaluator: Any, *,
    run_dir: Path | None, **extra: Any,
) -> Trainer:
    """A trainer from ``train`` (optimizer, lr, weight decay, epochs, patience, clipping, progress bar).

    Args:
        train: a recipe's ``train`` section (``TrainConfig`` or ``LMTrainConfig``).
        monitor: ``(metric, "min" | "max")`` for early stopping and the best checkpoint.
        model, batches, evaluator: as :class:`~embreg.train.trainer.Trainer` takes them.
        run_dir: checkpoints and history go here (``None``: nothing on disk).
        extra: further ``Trainer`` keywords (regularizers, objective, eval_train, ...).
    """
    metric, mode = monitor
    return Trainer(
        model,
        optimizer_factory(train.optimizer, train.lr, train.weight_decay),
        batches,
        evaluator,
        epochs=train.epochs,
        monitor=metric,
        mode=mode,
        patience=train.patience,
        clip_norm=train.clip_norm,
        run_dir=run_dir,
        progress=train.progress,
        **extra,
    )

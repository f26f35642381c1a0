"""Whether a ``last.safetensors`` state can continue in a trainer's epoch budget: checked before anything loads.

:meth:`embreg.train.trainer.Trainer.fit` with ``resume`` first checks that the state fits the model and optimizer
(:func:`embreg.runs.state_checks.check_resume_state`: a checkpoint of another model, ``model.dim`` changed, is a
one-line error naming the key), then calls :func:`check_resumable`, so that a checkpoint that has trained past the
trainer's ``epochs`` is a clear :class:`~embreg.errors.ConfigError` instead of a run reporting more epochs than it was
given. Whether the rest of the config matches is the runner's check (:mod:`embreg.recipes.resume_check`).

Example:
    >>> check_resumable({"next_epoch": 2}, 5, "last.safetensors")
    >>> try:
    ...     check_resumable({"next_epoch": 3}, 2, "x")
    ... except ConfigError as error:
    ...     print(str(error).split(":")[0])
    checkpoint x has trained 3 epochs, more than epochs=2
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embreg.errors import ConfigError

__all__ = ["check_resumable"]


def check_resumable(state: Mapping[str, Any], epochs: int, path: str | Path) -> None:
    """Refuses a checkpoint ``state`` that has trained more than ``epochs`` epochs.

    Args:
        state: the loaded ``last.safetensors`` state (``next_epoch``: epochs trained).
        epochs: the trainer's epoch budget.
        path: the checkpoint, for the message.

    Raises:
        ConfigError: the state has trained more than ``epochs`` epochs.
    """
    trained = int(state.get("next_epoch", 0))
    if trained > epochs:
        raise ConfigError(
            f"checkpoint {path} has trained {trained} epochs, more than epochs={epochs}: a resume may keep or raise "
            "the epoch budget, not cut it"
        )

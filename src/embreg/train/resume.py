"""Whether a ``last.safetensors`` state can continue in a trainer: checked before anything of it is loaded.

:meth:`embreg.train.trainer.Trainer.fit` with ``resume`` calls :func:`check_resumable`, so that a checkpoint of
another model (``model.dim`` changed) or one that has trained past the trainer's ``epochs`` is a clear
:class:`~embreg.errors.ConfigError` instead of a raw ``load_state_dict`` traceback or a run reporting more epochs
than it was given. Whether the rest of the config matches is the runner's check (:mod:`embreg.recipes.resume_check`).

Example:
    >>> model = torch.nn.Linear(2, 3)
    >>> check_resumable({"model": model.state_dict(), "next_epoch": 2}, 5, model, "last.safetensors")
    >>> try:
    ...     check_resumable({"model": torch.nn.Linear(2, 4).state_dict(), "next_epoch": 2}, 5, model, "x")
    ... except ConfigError as error:
    ...     print(str(error).split(". ")[0])
    checkpoint x holds another model: bias: (4,) in the checkpoint, (3,) in the model; weight: (4, 2) in the checkpoint, (3, 2) in the model
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from embreg.errors import ConfigError

__all__ = ["check_resumable"]


def check_resumable(state: Mapping[str, Any], epochs: int, model: nn.Module, path: str | Path) -> None:
    """Refuses a checkpoint ``state`` that cannot continue training ``model`` for ``epochs`` epochs.

    Args:
        state: the loaded ``last.safetensors`` state (``model``: a state dict; ``next_epoch``: epochs trained).
        epochs: the trainer's epoch budget.
        model: the model the trainer will load the state into.
        path: the checkpoint, for the message.

    Raises:
        ConfigError: the state's model differs from ``model`` in parameter or buffer names or shapes (the first
            few named, with both shapes), or it has trained more than ``epochs`` epochs.
    """
    own = model.state_dict()
    saved = state["model"]
    differences = [
        f"{name}: {_shape(saved.get(name))} in the checkpoint, {_shape(own.get(name))} in the model"
        for name in sorted(own.keys() | saved.keys())
        if _shape(saved.get(name)) != _shape(own.get(name))
    ]
    if differences:
        shown = "; ".join(differences[:5]) + (f"; ... ({len(differences)} in all)" if len(differences) > 5 else "")
        raise ConfigError(
            f"checkpoint {path} holds another model: {shown}. Resume with the settings of the run that wrote it, "
            "or start afresh in another directory"
        )
    trained = int(state.get("next_epoch", 0))
    if trained > epochs:
        raise ConfigError(
            f"checkpoint {path} has trained {trained} epochs, more than epochs={epochs}: a resume may keep or raise "
            "the epoch budget, not cut it"
        )


def _shape(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, torch.Tensor):
        return str(tuple(value.shape))
    return type(value).__name__

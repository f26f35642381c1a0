"""Checks that a loaded checkpoint fits the model and optimizer it is loaded into, before anything is changed.

A checkpoint can be well formed (it loads, its checksum holds) and still not fit: it was written for another
configuration, by another version of a model, or edited. ``load_state_dict`` would then fail with a many-line
``RuntimeError``, and the optimizer's would fail only at the next step, or not at all. These checks name the first
key that does not fit, in one line, as a :class:`~embreg.errors.DataError`:

* a missing entry of the training state (``optimizer``, ``next_epoch``, ...) or of a model state dict;
* a model state dict with a key the model does not have, or a tensor of another shape;
* optimizer state with another number of parameter groups or parameters, or a per-parameter tensor whose shape
  differs from its parameter's (``exp_avg``, ``momentum_buffer``, ...);
* a random-generator state of another size.

Example:
    >>> import torch
    >>> model = torch.nn.Linear(2, 3)
    >>> state = {"weight": torch.zeros(3, 4), "bias": torch.zeros(3)}
    >>> try:
    ...     check_model_state(state, model, "'run/best.safetensors'")
    ... except DataError as error:
    ...     print(error)
    checkpoint 'run/best.safetensors' does not fit the model: its model key 'weight' has shape [3, 4], the model's has [3, 2]. Start the run afresh (without --resume, or in a new directory)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn

from embreg.errors import DataError

__all__ = ["check_model_state", "check_optimizer_state", "check_resume_state", "check_best_state", "RESUME_KEYS"]

RESUME_KEYS = (
    "model",
    "optimizer",
    "torch_rng",
    "next_epoch",
    "step",
    "best_value",
    "best_epoch",
    "evals_since_best",
    "stopped_early",
    "history",
)
"""The entries every ``last.safetensors`` holds (the trainer's ``_state``)."""

_AFRESH = "Start the run afresh (without --resume, or in a new directory)"


def _misfit(source: str, what: str, thing: str = "the model") -> DataError:
    return DataError(f"checkpoint {source} does not fit {thing}: {what}. {_AFRESH}")


def _require(state: Mapping[str, Any], keys: Iterable[str], source: str) -> None:
    for key in keys:
        if key not in state:
            raise DataError(f"checkpoint {source} lacks the entry {key!r} of the training state. {_AFRESH}")


def check_model_state(state: Any, model: nn.Module, source: str) -> None:
    """Raises when ``state`` is not a state dict that ``model.load_state_dict`` takes as it is.

    Args:
        state: the checkpoint's model state dict.
        model: the model it is to be loaded into.
        source: the checkpoint, as errors name it (e.g. ``"'runs/mf/last.safetensors'"``).

    Raises:
        DataError: naming the first missing or unexpected key, or the key whose tensor shape differs.
    """
    if not isinstance(state, Mapping):
        raise _misfit(source, f"its model state is a {type(state).__name__}, not a state dict")
    expected = model.state_dict()
    for key, value in expected.items():
        if key not in state:
            raise _misfit(source, f"it lacks the model key {key!r}")
        if isinstance(value, torch.Tensor):
            saved = state[key]
            if not isinstance(saved, torch.Tensor):
                raise _misfit(source, f"its model key {key!r} holds a {type(saved).__name__}, not a tensor")
            if saved.shape != value.shape:
                raise _misfit(
                    source, f"its model key {key!r} has shape {list(saved.shape)}, the model's has {list(value.shape)}"
                )
    unexpected = [key for key in state if key not in expected]
    if unexpected:
        raise _misfit(source, f"its model key {unexpected[0]!r} is not one of the model's")


def check_optimizer_state(state: Any, optimizer: torch.optim.Optimizer, model: nn.Module, source: str) -> None:
    """Raises when ``state`` does not fit ``optimizer``: its groups, their sizes, or a per-parameter tensor's shape.

    Args:
        state: the checkpoint's optimizer state dict (``{"state": {index: {...}}, "param_groups": [...]}``).
        optimizer: the optimizer it is to be loaded into.
        model: the model whose parameters the optimizer updates (to name them in errors).
        source: the checkpoint, as errors name it.

    Raises:
        DataError: naming the parameter and the state key that do not fit.
    """
    thing = "the optimizer"
    if not isinstance(state, Mapping) or "state" not in state or "param_groups" not in state:
        raise _misfit(source, "its optimizer entry is not an optimizer state dict (state, param_groups)", thing)
    groups = state["param_groups"]
    if not isinstance(groups, (list, tuple)) or len(groups) != len(optimizer.param_groups):
        count = len(groups) if isinstance(groups, (list, tuple)) else "no list of"
        raise _misfit(source, f"it has {count} parameter groups, the optimizer {len(optimizer.param_groups)}", thing)
    names = {id(p): name for name, p in model.named_parameters()}
    params: dict[Any, torch.Tensor] = {}
    for i, (saved, own) in enumerate(zip(groups, optimizer.param_groups)):
        indices = saved.get("params") if isinstance(saved, Mapping) else None
        if not isinstance(indices, (list, tuple)) or len(indices) != len(own["params"]):
            size = len(indices) if isinstance(indices, (list, tuple)) else "no list of"
            raise _misfit(
                source, f"its parameter group {i} has {size} parameters, the optimizer's {len(own['params'])}", thing
            )
        params.update(zip(indices, own["params"]))
    per_param = state["state"]
    if not isinstance(per_param, Mapping):
        raise _misfit(source, "its optimizer state is not a mapping of parameters", thing)
    for index, entries in per_param.items():
        if index not in params:
            raise _misfit(source, f"it holds optimizer state for parameter {index!r}, which no group lists", thing)
        param = params[index]
        name = names.get(id(param), f"parameter {index}")
        for key, value in entries.items() if isinstance(entries, Mapping) else ():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != param.shape:
                raise _misfit(
                    source,
                    f"its optimizer state {key!r} of {name!r} has shape {list(value.shape)}, the parameter's "
                    f"{list(param.shape)}",
                    thing,
                )


def check_resume_state(
    state: Mapping[str, Any], model: nn.Module, optimizer: torch.optim.Optimizer, source: str
) -> None:
    """Checks a ``last.safetensors`` state before a resume loads it: every entry, the model, optimizer and RNG.

    Raises:
        DataError: naming the missing entry or the key that does not fit.
    """
    _require(state, RESUME_KEYS, source)
    check_model_state(state["model"], model, source)
    check_optimizer_state(state["optimizer"], optimizer, model, source)
    rng, own = state["torch_rng"], torch.get_rng_state()
    if not isinstance(rng, torch.Tensor) or rng.dtype != own.dtype or rng.shape != own.shape:
        shape = list(rng.shape) if isinstance(rng, torch.Tensor) else type(rng).__name__
        raise _misfit(
            source, f"its entry 'torch_rng' has shape {shape}, a generator state {list(own.shape)}", "torch's generator"
        )


def check_best_state(state: Mapping[str, Any], model: nn.Module, source: str) -> None:
    """Checks a ``best.safetensors`` state (``{"model": ..., "epoch": ...}``) before its model is used.

    Raises:
        DataError: naming the missing entry or the model key that does not fit.
    """
    _require(state, ("model",), source)
    check_model_state(state["model"], model, source)

"""The regulariser protocol every technique follows (see docs/architecture.md).

A regulariser may implement any of three hooks; the trainer calls those present:

* ``prepare(model) -> model`` once before training (e.g. Mixout, weight drop);
* ``penalty(ctx) -> Tensor``: a scalar loss term, already weighted;
* ``after_backward(ctx)``: changes gradients before clipping and the optimizer step.

An :class:`Objective` replaces the standard ``model.loss(batch, model(batch))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

import torch
from torch import nn

from embreg.models.output import ModelOutput
from embreg.registry import register

if TYPE_CHECKING:
    from embreg.models.protocols import LossModel


@dataclass
class StepContext:
    """What a regulariser sees during one training step.

    Attributes:
        model: the model being trained.
        batch: the mini-batch, a dict of tensors.
        output: the forward pass's output for ``batch`` (``None`` before forward).
        loss: the task loss of this step (``None`` before it is computed).
        step: the global optimisation step, counting from 0.
        extras: free space for techniques that need to pass state between hooks.
    """

    model: nn.Module
    batch: dict[str, torch.Tensor]
    output: ModelOutput | None = None
    loss: torch.Tensor | None = None
    step: int = 0
    extras: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Regularizer(Protocol):
    """Marker protocol: a regulariser implements any subset of the three hooks."""


class Objective(Protocol):
    """Computes the task loss of one step, replacing ``model.loss(batch, model(batch))``."""

    def __call__(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ModelOutput]: ...


def standard_objective(model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ModelOutput]:
    """The plain objective: one forward pass and the model's own loss."""
    output = model(batch)
    return cast("LossModel", model).loss(batch, output), output


@dataclass
class StandardObjectiveConfig:
    """``objective: {name: standard}``: no arguments."""


@register(
    "objective",
    "standard",
    config=StandardObjectiveConfig,
    summary="one forward pass and the model's own loss",
    reference="",
)
def build_standard_objective(config: StandardObjectiveConfig, context: Any) -> Objective:
    """:func:`standard_objective`."""
    return standard_objective

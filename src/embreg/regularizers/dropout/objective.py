"""Dropout_k: the loss averaged over k dropout masks per example (dropout-explicit-implicit-regularization.txt,
Alg. 1 and eq. 3.2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.models.output import ModelOutput
from embreg.nn.dropout_control import dropout_active
from embreg.registry import register

if TYPE_CHECKING:
    from embreg.models.protocols import LossModel


class DropoutK:
    """Objective ``(1/k) sum_j loss(F(x, eta_j))`` with ``k`` independent dropout draws per example.

    Every draw is a full forward pass with the model's own dropout blocks (fresh masks from torch's global RNG); the
    k graphs are kept until the trainer's single backward, so memory grows with k. Cost: k forward and k backward
    passes. ``k = 1`` is standard dropout. In eval mode, or when the model has no active dropout, one pass is made
    (the k passes would be identical).

    Args:
        k: number of dropout samples, ``>= 1``.

    Returns (when called):
        ``(loss, output)`` with the output of the first draw (which is also what a stateful model carries on).

    Example:
        >>> from embreg.models import LSTMLanguageModel
        >>> model = LSTMLanguageModel.build(vocab_size=20, emb_dim=8, hidden_dim=8, layers=1, q_output=0.4)
        >>> batch = {"input": torch.randint(0, 20, (2, 5)), "target": torch.randint(0, 20, (2, 5))}
        >>> loss, out = DropoutK(4)(model, batch)
        >>> loss.ndim
        0
    """

    def __init__(self, k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise EmbregError(f"k={k!r} must be an integer >= 1 (the number of dropout samples)")
        self.k = k

    def __call__(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ModelOutput]:
        draws = self.k if dropout_active(model) else 1
        first = model(batch)
        total = cast("LossModel", model).loss(batch, first)
        for _ in range(draws - 1):
            total = total + cast("LossModel", model).loss(batch, model(batch))
        return total / draws, first

    def __repr__(self) -> str:
        return f"DropoutK(k={self.k})"


@dataclass
class DropoutKConfig:
    """``objective: {name: dropout-k, k: 4}``: the mean loss over ``k`` dropout masks (Alg. 1)."""

    k: int = 2

    def __post_init__(self) -> None:
        if self.k < 1:
            raise EmbregError(f"k={self.k} must be >= 1")


@register(
    "objective",
    "dropout-k",
    config=DropoutKConfig,
    summary="Dropout_k: average the loss over k dropout masks per step (any model with dropout)",
    reference="dropout-explicit-implicit-regularization.txt, Alg. 1",
)
def build_dropout_k(config: DropoutKConfig, context: Any) -> DropoutK:
    """:class:`DropoutK` with ``config.k`` masks."""
    return DropoutK(config.k)

"""embreg's model protocol as static types, for code that holds a model as a plain ``nn.Module``.

A model is an ``nn.Module`` whose ``forward(batch)`` returns a :class:`~embreg.models.output.ModelOutput` and which
has ``loss(batch, output)``; some models offer more (``score_all`` for ranking, ``forward_sequence`` for language
models, ``dropout_sites`` and ``step_targets`` for the analytic dropout regularisers). Python's types cannot say
"an ``nn.Module`` that also has ``loss``", so callers that rely on a method of the protocol ``typing.cast`` the
module to one of these protocols at the call (no runtime check, no cost). Import them under ``TYPE_CHECKING``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from embreg.models.output import ModelOutput
    from embreg.nn.dropout_sites import DropoutSite

__all__ = ["LossModel", "RankingModel", "SequenceModel", "SiteModel", "TargetModel"]

Batch = dict[str, torch.Tensor]


class LossModel(Protocol):
    """``model.loss(batch, output) -> scalar``: the task loss of a forward pass (every embreg model)."""

    def loss(self, batch: Batch, output: ModelOutput) -> torch.Tensor: ...


class RankingModel(Protocol):
    """``model.score_all(users (U,)) -> (U, num_items)`` scores (ranking models, e.g. BPR)."""

    def score_all(self, users: torch.Tensor) -> torch.Tensor: ...


class NextItemModel(Protocol):
    """``model.score_next({"user": (B,), "input": (B, L)}) -> (B, num_items)`` scores of the next item (SASRec)."""

    def score_next(self, batch: Batch) -> torch.Tensor: ...


class SequenceModel(Protocol):
    """``model.forward_sequence(tokens (B, T), state) -> (output, state)`` (language models)."""

    def forward_sequence(self, tokens: torch.Tensor, state: Any = None) -> tuple[ModelOutput, Any]: ...


class SiteModel(Protocol):
    """``model.dropout_sites(batch, output) -> {name: DropoutSite}`` (models that name their dropout sites)."""

    def dropout_sites(self, batch: Batch, output: ModelOutput) -> dict[str, DropoutSite]: ...


class TargetModel(Protocol):
    """``model.step_targets(batch) -> ids``: the targets the loss used this step (after label transforms)."""

    def step_targets(self, batch: Batch) -> torch.Tensor: ...

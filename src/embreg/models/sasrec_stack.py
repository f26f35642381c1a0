"""The layer stack of SASRec / SSE-PT: its self-attention blocks, run again from any block's input.

lnsr-noise-stability-bert.txt, Sec. 3.1 and 5.4: LNSR perturbs the input of layer ``b`` and compares the states of
layers ``b..L``; R3F and SMART perturb ``h_0`` and compare the predictions. For
:class:`~embreg.models.sasrec.SASRec`:

* ``h_0`` is the embedded input ``(B, L, D)`` that enters the first block: item vectors (times ``sqrt(dim)``
  unless ``embedding_scale: none``; with the user vector for SSE-PT), plus positions, after the embedding layer
  norm (``embedding_norm``) and dropout, zero at ``PAD`` inputs;
* layer ``r`` is block ``r`` followed by zeroing the ``PAD`` positions, so ``h_r`` ``(B, L, D)`` is what the
  forward pass feeds block ``r + 1``;
* the head is the final layer norm (the identity for post-LN blocks, whose last sum is normalised already), so
  the predictions are the states ``F`` ``(B, L, D)`` that every item score ``<F_l, out(j)>`` is read from.

The predictions are hidden states, not logits: R3F and SMART compare them by squared error (``divergence: auto``
picks ``mse`` for this stack; ``sym_kl`` is refused). A ``PAD`` position stays 0 under any perturbation (its keys
are masked and each layer zeroes it), so it adds nothing to any term.

The stack re-runs the step's batch with the ids the forward pass read (after the item transform, drawn once per
step); dropout follows the model's mode.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from embreg.nn.layer_stack import LayerStack, check_layer_index

__all__ = ["SASRecLayers", "SASRecStack"]


class SASRecLayers(Protocol):
    """What the stack reads of a :class:`~embreg.models.sasrec.SASRec` (which has all of it).

    Attributes:
        training: the module's mode (the blocks' dropout follows it).
        blocks: the self-attention blocks, each ``block(hidden, mask, training)`` ``(B, L, D) -> (B, L, D)``.
        final_norm: the head, ``(B, L, D) -> (B, L, D)``.
    """

    @property
    def training(self) -> bool: ...
    @property
    def blocks(self) -> nn.ModuleList: ...
    @property
    def final_norm(self) -> nn.Module: ...
    def step_inputs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The input ids ``(B, L)`` the forward pass reads this step (after the item transform)."""
        ...

    def attention_mask(self, items: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The blocks' attention mask and the ``keep`` factor ``(B, L, 1)`` (0 at ``PAD`` inputs) of ids ``(B, L)``."""
        ...


class SASRecStack(LayerStack):
    """The ``blocks`` of a :class:`~embreg.models.sasrec.SASRec` as layers ``1..L``, head its final layer norm.

    Args:
        model: the SASRec / SSE-PT model.

    Shapes:
        every state ``(B, L, D)``, ``D = dim + user_dim``; :meth:`predict` -> ``(B, L, D)``.
    """

    divergence = "mse"

    def __init__(self, model: SASRecLayers) -> None:
        self.model = model
        self.num_layers = len(model.blocks)

    def layer(self, index: int) -> nn.Module:
        check_layer_index(index, self.num_layers)
        return self.model.blocks[index - 1]

    def run_layer(self, index: int, hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        model = self.model
        mask, keep = model.attention_mask(model.step_inputs(batch), hidden.dtype)
        return model.blocks[index - 1](hidden, mask, model.training) * keep

    def predict(self, last_hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.model.final_norm(last_hidden)

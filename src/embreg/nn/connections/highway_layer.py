"""Highway layers (:class:`HighwayLayer`, also named :data:`Highway`).

Reference: nlp-best-practices.txt, "Layer connections" (Srivastava et al., 2015, eq. 2-3):
``h = t * g(W x + b) + (1 - t) * x`` with the transform gate ``t = sigmoid(W_T x + b_T)`` and the carry gate
``1 - t``. ``b_T`` starts negative (Srivastava et al., Sec. 2.2: "-1, -3 etc."), so a new layer starts close to
the identity. When the widths differ, ``x`` is carried through a bias-free projection ``W_s x`` (Srivastava et al.
leave the change of width open; this is He et al.'s projection shortcut).
"""

from __future__ import annotations

import torch
from torch import nn

from embreg.nn.connections.base import ConnectedLayer, carried, shortcut

GATE_BIAS = -1.0
"""The transform gate's initial bias ``b_T``: ``t = sigmoid(-1) = 0.27`` at the start, so the input is mostly
carried."""


def highway(
    x: torch.Tensor,
    transformed: torch.Tensor,
    gate_weight: torch.Tensor,
    gate_bias: torch.Tensor,
    carry: torch.Tensor | None = None,
) -> torch.Tensor:
    """``t * transformed + (1 - t) * carry`` with ``t = sigmoid(x W_T^T + b_T)``.

    Args:
        x: the layer's input ``(..., D_in)``.
        transformed: ``g(W x + b)`` ``(..., D_out)``.
        gate_weight: ``W_T`` ``(D_out, D_in)``; gate_bias: ``b_T`` ``(D_out,)``.
        carry: what the carry gate lets through (default ``x``, which needs ``D_in == D_out``).

    Example:
        >>> x = torch.ones(1, 2)
        >>> highway(x, torch.zeros(1, 2), torch.zeros(2, 2), torch.zeros(2))  # t = 0.5
        tensor([[0.5000, 0.5000]])
    """
    gate = torch.sigmoid(torch.nn.functional.linear(x, gate_weight, gate_bias))
    carry = x if carry is None else carry
    return gate * transformed + (1.0 - gate) * carry


class HighwayLayer(ConnectedLayer):
    """Module form of :func:`highway` around ``block``.

    Args:
        block: ``x -> g(W x + b)`` ``(..., in_dim) -> (..., out_dim)``, e.g. ``Linear -> ReLU``.
        in_dim, out_dim: the widths; when they differ the carry is a bias-free projection.
        gate_bias: the initial ``b_T`` (default :data:`GATE_BIAS`).

    Shapes:
        ``(..., in_dim) -> (..., out_dim)``.

    Example:
        >>> layer = HighwayLayer(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), 4, 4)
        >>> layer(torch.randn(3, 4)).shape
        torch.Size([3, 4])
    """

    def __init__(self, block: nn.Module | None, in_dim: int, out_dim: int, *, gate_bias: float = GATE_BIAS) -> None:
        super().__init__(block, in_dim, out_dim)
        self.gate = nn.Linear(in_dim, out_dim)
        nn.init.xavier_uniform_(self.gate.weight)
        nn.init.constant_(self.gate.bias, gate_bias)
        self.shortcut = shortcut(in_dim, out_dim)

    def connect(self, x: torch.Tensor, transformed: torch.Tensor) -> torch.Tensor:
        """The highway combination of the input ``x`` and the block's output (for blocks run elsewhere)."""
        return highway(x, transformed, self.gate.weight, self.gate.bias, carried(x, self.shortcut))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.connect(x, self.run_block(x))


Highway = HighwayLayer
"""The name Srivastava et al.'s layer goes by (``from embreg.nn import Highway``): the same class as
:class:`HighwayLayer`."""

"""Residual connections.

Reference: nlp-best-practices.txt, "Layer connections" (He et al., 2016, eq. 1-2): ``h = g(W x + b) + x``; when
the widths differ, ``x`` is projected by a bias-free ``W_s`` (eq. 2).
"""

from __future__ import annotations

import torch
from torch import nn

from embreg.nn.connections.base import ConnectedLayer, carried, shortcut


def residual(x: torch.Tensor, transformed: torch.Tensor, projection: torch.Tensor | None = None) -> torch.Tensor:
    """``transformed + x`` (``transformed + x W_s^T`` with ``projection`` ``W_s (D_out, D_in)``).

    Example:
        >>> residual(torch.ones(1, 2), torch.full((1, 2), 2.0))
        tensor([[3., 3.]])
    """
    return transformed + (x if projection is None else torch.nn.functional.linear(x, projection))


class ResidualLayer(ConnectedLayer):
    """Module form of :func:`residual` around ``block``.

    Args:
        block: ``x -> g(W x + b)`` ``(..., in_dim) -> (..., out_dim)``.
        in_dim, out_dim: the widths; when they differ the shortcut is a bias-free projection.

    Shapes:
        ``(..., in_dim) -> (..., out_dim)``.

    Example:
        >>> layer = ResidualLayer(nn.Sequential(nn.Linear(4, 2), nn.ReLU()), 4, 2)
        >>> layer(torch.randn(3, 4)).shape
        torch.Size([3, 2])
    """

    def __init__(self, block: nn.Module | None, in_dim: int, out_dim: int) -> None:
        super().__init__(block, in_dim, out_dim)
        self.shortcut = shortcut(in_dim, out_dim)

    def connect(self, x: torch.Tensor, transformed: torch.Tensor) -> torch.Tensor:
        """The block's output plus the (projected) input, for blocks run elsewhere."""
        return transformed + carried(x, self.shortcut)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.connect(x, self.run_block(x))

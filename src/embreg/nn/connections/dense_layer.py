"""Dense connections.

Reference: nlp-best-practices.txt, "Layer connections" (Huang et al., 2017, eq. 2): layer ``l`` reads the
concatenation of the inputs of all layers up to it, ``h^l = g(W [x^1; ...; x^l] + b)``, where ``x^1`` is the
stack's input and ``x^{k+1} = h^k``. A :class:`DenseLayer` keeps that concatenation as its output, so each layer
maps ``[x^1; ...; x^l] -> [x^1; ...; x^l; h^l]``; the last layer of a stack returns only ``h^L``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from embreg.nn.connections.base import ConnectedLayer


def dense_input(states: Sequence[torch.Tensor]) -> torch.Tensor:
    """``[x^1; ...; x^l]``: the states concatenated along the last axis.

    Example:
        >>> dense_input([torch.ones(1, 2), torch.zeros(1, 1)])
        tensor([[1., 1., 0.]])
    """
    return torch.cat(list(states), dim=-1)


class DenseLayer(ConnectedLayer):
    """Layer ``l`` of a densely connected stack: ``block`` reads ``[x^1; ...; x^l]`` (``in_dim`` wide).

    Args:
        block: ``(..., in_dim) -> (..., out_dim)``, its ``W`` as wide as all the earlier states together.
        in_dim, out_dim: the widths of the concatenated input and of ``h^l``.
        last: the stack's last layer returns ``h^l`` alone; the others return ``[input; h^l]``.

    Shapes:
        ``(..., in_dim) -> (..., in_dim + out_dim)`` (``(..., out_dim)`` when ``last``).

    Example:
        >>> first = DenseLayer(nn.Sequential(nn.Linear(4, 3), nn.ReLU()), 4, 3, last=False)
        >>> second = DenseLayer(nn.Sequential(nn.Linear(7, 2), nn.ReLU()), 7, 2, last=True)
        >>> x = torch.randn(5, 4)
        >>> first(x).shape, second(first(x)).shape
        (torch.Size([5, 7]), torch.Size([5, 2]))
    """

    def __init__(self, block: nn.Module | None, in_dim: int, out_dim: int, *, last: bool) -> None:
        super().__init__(block, in_dim, out_dim)
        self.last = last

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.run_block(x)
        return out if self.last else dense_input([x, out])

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, last={self.last}"

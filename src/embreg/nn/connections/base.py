"""What the connection blocks share: the base class, the shortcut projection and the settings' names."""

from __future__ import annotations

import torch
from torch import nn

from embreg.errors import EmbregError

CONNECTIONS = ("none", "residual", "highway", "dense")
"""The layer-connection settings of the models that offer them (nlp-best-practices.txt, "Layer connections")."""


def check_connection(kind: str, name: str = "connections") -> str:
    """Returns ``kind`` when it is one of :data:`CONNECTIONS`; otherwise raises :class:`EmbregError`.

    Example:
        >>> check_connection("highway")
        'highway'
    """
    if kind not in CONNECTIONS:
        raise EmbregError(f"{name}={kind!r} is not one of {CONNECTIONS}")
    return kind


def shortcut(in_dim: int, out_dim: int) -> nn.Linear | None:
    """The shortcut of a layer whose input and output widths differ: a bias-free ``Linear(in_dim, out_dim)``
    (He et al., 2016, eq. 2, the projection shortcut ``W_s x``); ``None`` (the identity) when they are equal.

    Example:
        >>> shortcut(4, 4) is None, shortcut(4, 2)
        (True, Linear(in_features=4, out_features=2, bias=False))
    """
    if in_dim == out_dim:
        return None
    projection = nn.Linear(in_dim, out_dim, bias=False)
    nn.init.xavier_uniform_(projection.weight)
    return projection


def carried(x: torch.Tensor, projection: nn.Module | None) -> torch.Tensor:
    """``x`` through the shortcut (identity when ``projection`` is None)."""
    return x if projection is None else projection(x)


class ConnectedLayer(nn.Module):
    """A layer ``block`` (``x -> g(W x + b)``) with a connection around it; subclasses say which.

    :func:`embreg.nn.layer_stack.linear_block_bounds` counts one layer per ``ConnectedLayer`` of a container, so a
    model's layer stack splits a connected MLP as it splits a plain one. ``block=None`` builds the connection alone,
    for a layer that the model runs itself (an LSTM returning its state too): call ``connect(x, g(x))`` then.
    """

    block: nn.Module | None

    def __init__(self, block: nn.Module | None, in_dim: int, out_dim: int) -> None:
        super().__init__()
        if in_dim < 1 or out_dim < 1:
            raise EmbregError(f"in_dim={in_dim} and out_dim={out_dim} must be >= 1")
        self.block = block
        self.in_dim, self.out_dim = in_dim, out_dim

    def run_block(self, x: torch.Tensor) -> torch.Tensor:
        """``block(x)``; raises :class:`EmbregError` for a connection built without a block."""
        if self.block is None:
            raise EmbregError(f"this {type(self).__name__} was built without a block: call connect(x, block(x))")
        return self.block(x)

    def extra_repr(self) -> str:
        return f"in_dim={self.in_dim}, out_dim={self.out_dim}"

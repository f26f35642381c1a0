"""What user-item recommenders share: per-table index transforms, dropout on vectors, and an L2 weight."""

from __future__ import annotations

from torch import nn


class UserItemModel(nn.Module):
    """Base of user-item models: holds the index transforms (e.g. SSE), vector dropout and the L2 weight.

    Args:
        user_transform: ids -> ids module applied to user ids in training (``None``: identity).
        item_transform: ids -> ids module applied to item ids in training (``None``: identity).
        dropout: dropout probability on looked-up vectors, in ``[0, 1)``.
        l2: weight of the squared L2 norm of looked-up parameters, ``>= 0``.
    """

    def __init__(
        self,
        *,
        user_transform: nn.Module | None = None,
        item_transform: nn.Module | None = None,
        dropout: float = 0.0,
        l2: float = 0.0,
    ) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout={dropout} is outside [0, 1)")
        if l2 < 0:
            raise ValueError(f"l2={l2} must be >= 0")
        self.user_transform = user_transform if user_transform is not None else nn.Identity()
        self.item_transform = item_transform if item_transform is not None else nn.Identity()
        self.vector_dropout = nn.Dropout(dropout)
        self.l2 = l2


def normal_table(num_embeddings: int, dim: int, std: float) -> nn.Embedding:
    """An ``nn.Embedding(num_embeddings, dim)`` with weights drawn from N(0, std^2)."""
    table = nn.Embedding(num_embeddings, dim)
    nn.init.normal_(table.weight, std=std)
    return table


def zero_table(num_embeddings: int, dim: int = 1) -> nn.Embedding:
    """An ``nn.Embedding(num_embeddings, dim)`` of zeros (biases)."""
    table = nn.Embedding(num_embeddings, dim)
    nn.init.zeros_(table.weight)
    return table

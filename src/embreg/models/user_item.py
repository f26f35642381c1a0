"""What user-item recommenders share: per-table index transforms, dropout on vectors, and an L2 weight."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from torch import nn

from embreg.embeddings.tables import TableRequest
from embreg.errors import ConfigError
from embreg.models.transform_sites import KeyedTransforms


class UserItemModel(KeyedTransforms, nn.Module):
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

    def transform_sites(self) -> list[tuple[str, nn.Module]]:
        """``user`` and ``item`` ids with their transforms (:mod:`embreg.models.transform_sites`)."""
        return [("user", self.user_transform), ("item", self.item_transform)]

    def embedding_parameter_count(self) -> int:
        """Parameters of the user and item tables (the vectors; bias tables are not counted), as the
        mixed-dimension paper sizes a model."""
        tables = [getattr(self, name, None) for name in ("user_embedding", "item_embedding")]
        return sum(p.numel() for table in tables if isinstance(table, nn.Module) for p in table.parameters())


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


@dataclass
class UserItemConfig:
    """Arguments shared by the user-item models' recipe sections (``model: {name: mf, dim: 64, ...}``).

    Attributes:
        dim: embedding dimension (the base dimension of mixed-dimension tables).
        dropout: dropout on the looked-up user/item vectors (the SSE paper's "Dropout + MF/BPR" baseline).
        l2: weight of the batch-mean squared norm of looked-up vectors and biases.
        init_std: standard deviation of the normal initialisation of the vectors.
        init: ``normal`` (rows ``N(0, init_std^2)``) or ``xavier_uniform`` (mixed-dimension-embeddings.txt,
            Appendix H-I; see :func:`embreg.embeddings.init_embedding_`).
    """

    dim: int = 64
    dropout: float = 0.0
    l2: float = 0.0
    init_std: float = 0.1
    init: Literal["normal", "xavier_uniform"] = "normal"

    def __post_init__(self) -> None:
        if self.dim < 1:
            raise ConfigError(f"model.dim={self.dim} must be >= 1")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"model.dropout={self.dropout} is outside [0, 1)")
        if self.l2 < 0:
            raise ConfigError(f"model.l2={self.l2} must be >= 0")
        if self.init_std <= 0:
            raise ConfigError(f"model.init_std={self.init_std} must be > 0")


def user_item_tables(config: Any, context: Any) -> tuple[nn.Module, nn.Module]:
    """The user and item tables of a recipe (uniform or mixed-dimension, by its ``embeddings`` section), sized by
    the training counts of ``context`` (:class:`embreg.recipes.context.BuildContext`)."""
    request = TableRequest(
        [context.frequencies("user"), context.frequencies("item")],
        dim=config.dim,
        init=config.init,
        init_std=config.init_std,
    )
    (users, items), _ = context.tables(request)
    return users, items

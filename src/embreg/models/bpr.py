"""Bayesian Personalised Ranking (BPR) for implicit feedback.

Reference: sse-stochastic-shared-embeddings.txt, Section 4.1 and Table 3 ("BPR", "Dropout + BPR",
"SSE-SE + BPR"): BPR is a one-hidden-layer network trained with the pairwise ranking loss.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from embreg.models.output import ModelOutput
from embreg.models.user_item import UserItemConfig, UserItemModel, normal_table, user_item_tables, zero_table
from embreg.registry import register


class BPR(UserItemModel):
    """BPR matrix factorisation: ``x_ui = <p_u, q_i> + b_i``, loss ``-log sigmoid(x_ui - x_uj)``.

    The same ``item_transform`` (e.g. SSE on the item table) swaps both the positive and the negative item ids
    independently, and one swapped id selects both the item vector and its bias.

    Args:
        user_embedding: maps user ids ``(B,)`` to ``(B, D)``.
        item_embedding: maps item ids ``(B,)`` to ``(B, D)``.
        item_bias: maps item ids ``(B,)`` to ``(B, 1)``, or ``None`` for no item bias.
        user_transform: optional ids -> ids module applied to user ids in training.
        item_transform: optional ids -> ids module applied to positive and negative item ids in training.
        dropout: dropout probability on the user and item vectors ("Dropout + BPR").
        l2: weight of the squared L2 norm of the looked-up vectors and biases, averaged over the batch.

    Example:
        >>> bpr = BPR.build(num_users=10, num_items=20, dim=8)
        >>> batch = {"user": torch.tensor([0, 1]), "pos": torch.tensor([3, 4]), "neg": torch.tensor([5, 6])}
        >>> out = bpr(batch)              # predictions = x_ui - x_uj, shape (2,)
        >>> bpr.loss(batch, out) > 0
        tensor(True)
        >>> bpr.score_all(torch.tensor([0, 1])).shape
        torch.Size([2, 20])
    """

    def __init__(
        self,
        user_embedding: nn.Module,
        item_embedding: nn.Module,
        item_bias: nn.Module | None = None,
        *,
        user_transform: nn.Module | None = None,
        item_transform: nn.Module | None = None,
        dropout: float = 0.0,
        l2: float = 0.0,
    ) -> None:
        super().__init__(user_transform=user_transform, item_transform=item_transform, dropout=dropout, l2=l2)
        self.user_embedding = user_embedding
        self.item_embedding = item_embedding
        self.item_bias = item_bias

    @classmethod
    def build(
        cls, num_users: int, num_items: int, dim: int, *, init_std: float = 0.1, item_bias: bool = True, **kwargs
    ) -> BPR:
        """Builds a model with plain ``nn.Embedding`` tables (vectors ~ N(0, init_std^2), biases 0)."""
        bias = zero_table(num_items) if item_bias else None
        return cls(normal_table(num_users, dim, init_std), normal_table(num_items, dim, init_std), bias, **kwargs)

    def transform_sites(self) -> list[tuple[str, nn.Module]]:
        """``user``, ``pos`` and ``neg`` ids with their transforms, in :meth:`forward`'s order."""
        return [("user", self.user_transform), ("pos", self.item_transform), ("neg", self.item_transform)]

    def _item_terms(self, items: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        vectors = self.item_embedding(items)
        if self.item_bias is None:
            return vectors, torch.zeros(items.shape, dtype=vectors.dtype, device=vectors.device)
        return vectors, self.item_bias(items).squeeze(-1)

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        """Scores ``batch["pos"]`` against ``batch["neg"]`` for ``batch["user"]`` (all ``(B,)``).

        Returns predictions ``x_ui - x_uj`` of shape ``(B,)``.
        """
        users = self.user_transform(batch["user"])
        pos = self.item_transform(batch["pos"])
        neg = self.item_transform(batch["neg"])
        user_vectors = self.user_embedding(users)
        pos_vectors, pos_bias = self._item_terms(pos)
        neg_vectors, neg_bias = self._item_terms(neg)
        u = self.vector_dropout(user_vectors)
        x_pos = (u * self.vector_dropout(pos_vectors)).sum(-1) + pos_bias
        x_neg = (u * self.vector_dropout(neg_vectors)).sum(-1) + neg_bias
        hidden = {
            "user_vectors": user_vectors,
            "pos_vectors": pos_vectors,
            "neg_vectors": neg_vectors,
            "pos_bias": pos_bias,
            "neg_bias": neg_bias,
        }
        return ModelOutput(predictions=x_pos - x_neg, hidden=hidden)

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Mean BPR loss ``-log sigmoid(x_ui - x_uj)`` plus the batch-mean L2 penalty of looked-up parameters."""
        ranking = -F.logsigmoid(output.predictions).mean()
        if self.l2 == 0.0:
            return ranking
        h = output.hidden
        norms = (
            h["user_vectors"].pow(2).sum(-1)
            + h["pos_vectors"].pow(2).sum(-1)
            + h["neg_vectors"].pow(2).sum(-1)
            + h["pos_bias"].pow(2)
            + h["neg_bias"].pow(2)
        )
        return ranking + self.l2 * norms.mean()

    @torch.no_grad()
    def score_all(self, users: torch.Tensor) -> torch.Tensor:
        """Scores of every item for ``users`` ``(U,)``: returns ``(U, num_items)``; no transforms, no dropout."""
        user_vectors = self.user_embedding(users)
        item_weight = _table(self.item_embedding)
        scores = user_vectors @ item_weight.T
        if self.item_bias is not None:
            scores = scores + _table(self.item_bias).squeeze(-1)
        return scores


def _table(embedding: nn.Module) -> torch.Tensor:
    """All rows of an embedding module ``(N, D)``, for plain and wrapped embeddings alike."""
    n = getattr(embedding, "num_embeddings", None)
    if n is None:
        raise TypeError(f"{type(embedding).__name__} has no num_embeddings; cannot score every item")
    device = next(embedding.parameters()).device
    return embedding(torch.arange(n, device=device))


@register(
    "model",
    "bpr",
    config=UserItemConfig,
    tasks=("ranking",),
    kinds=("user", "item"),
    embeddings=("uniform", "md"),
    provides=(),
    summary="Bayesian personalised ranking (pairwise loss, sampled negatives)",
    reference="sse-stochastic-shared-embeddings.txt, Sec. 4.1 (BPR)",
)
def build_bpr(config: UserItemConfig, context: Any) -> BPR:
    """:class:`BPR` over the recipe's user/item tables (uniform, or mixed-dimension: both blocked by training
    popularity and sized jointly, as MF's) with an item bias, with its user/item index transforms."""
    bias = zero_table(context.num_ids("item"))  # drawn first: the order every stored BPR result used
    users, items = user_item_tables(config, context)
    return BPR(
        users,
        items,
        bias,
        user_transform=context.transforms.get("user"),
        item_transform=context.transforms.get("item"),
        dropout=config.dropout,
        l2=config.l2,
    )

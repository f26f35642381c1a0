"""Biased matrix factorisation for explicit ratings.

Reference: sse-stochastic-shared-embeddings.txt, Section 4.1 ("MF ... uses the squared loss designed for
explicit feedback data"), Table 2 ("Dropout + MF", "SSE-SE + MF").
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from embreg.models.mf_fused_step import FusedMFStep, fused_mf_step
from embreg.models.output import ModelOutput
from embreg.models.user_item import UserItemConfig, UserItemModel, normal_table, user_item_tables, zero_table
from embreg.registry import register


class BiasedMF(UserItemModel):
    """Biased MF: ``r_hat(u, i) = mu + b_u + b_i + <p_u, q_i>`` trained with the squared loss.

    The model receives its parts already built, so plain, mixed-dimension or otherwise wrapped embeddings swap in
    without flags. Index transforms (e.g. :class:`embreg.sse.SSE`) are applied to the ids *once*, and the same
    swapped id then selects both the vector and the bias, so an SSE swap replaces an item's whole representation
    (paper Algorithm 1, line 8).

    Args:
        user_embedding: maps user ids ``(B,)`` to ``(B, D)``.
        item_embedding: maps item ids ``(B,)`` to ``(B, D)``.
        user_bias: maps user ids ``(B,)`` to ``(B, 1)`` (an ``nn.Embedding(num_users, 1)``).
        item_bias: maps item ids ``(B,)`` to ``(B, 1)``.
        global_mean: ``mu``, usually the mean training rating.
        user_transform: optional ids -> ids module applied to user ids in training (SSE).
        item_transform: optional ids -> ids module applied to item ids in training (SSE).
        dropout: dropout probability on the user and item vectors (the paper's "Dropout + MF" baseline).
        l2: weight of the squared L2 norm of the looked-up vectors and biases, averaged over the batch.

    Example:
        >>> mf = BiasedMF.build(num_users=10, num_items=20, dim=8, global_mean=3.5)
        >>> batch = {"user": torch.tensor([0, 1]), "item": torch.tensor([3, 4]), "rating": torch.tensor([4., 2.])}
        >>> out = mf(batch)
        >>> out.predictions.shape
        torch.Size([2])
        >>> mf.loss(batch, out).ndim
        0
    """

    def __init__(
        self,
        user_embedding: nn.Module,
        item_embedding: nn.Module,
        user_bias: nn.Module,
        item_bias: nn.Module,
        *,
        global_mean: float = 0.0,
        user_transform: nn.Module | None = None,
        item_transform: nn.Module | None = None,
        dropout: float = 0.0,
        l2: float = 0.0,
    ) -> None:
        super().__init__(user_transform=user_transform, item_transform=item_transform, dropout=dropout, l2=l2)
        self.user_embedding = user_embedding
        self.item_embedding = item_embedding
        self.user_bias = user_bias
        self.item_bias = item_bias
        self.register_buffer("global_mean", torch.tensor(float(global_mean)))

    @classmethod
    def build(
        cls,
        num_users: int,
        num_items: int,
        dim: int,
        *,
        init_std: float = 0.1,
        **kwargs,
    ) -> BiasedMF:
        """Builds a model with plain ``nn.Embedding`` tables (vectors ~ N(0, init_std^2), biases 0)."""
        return cls(
            normal_table(num_users, dim, init_std),
            normal_table(num_items, dim, init_std),
            zero_table(num_users),
            zero_table(num_items),
            **kwargs,
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        """Predicts ratings for ``batch["user"]``, ``batch["item"]`` (both ``(B,)``); returns ``(B,)`` predictions."""
        users = self.user_transform(batch["user"])
        items = self.item_transform(batch["item"])
        user_vectors = self.user_embedding(users)
        item_vectors = self.item_embedding(items)
        user_bias = self.user_bias(users).squeeze(-1)
        item_bias = self.item_bias(items).squeeze(-1)
        dot = (self.vector_dropout(user_vectors) * self.vector_dropout(item_vectors)).sum(-1)
        predictions = self.global_mean + user_bias + item_bias + dot
        hidden = {
            "user_vectors": user_vectors,
            "item_vectors": item_vectors,
            "user_bias": user_bias,
            "item_bias": item_bias,
        }
        return ModelOutput(predictions=predictions, hidden=hidden)

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Mean squared error plus ``l2`` times the batch-mean squared norm of the looked-up parameters."""
        squared_error = (output.predictions - batch["rating"]).pow(2).mean()
        if self.l2 == 0.0:
            return squared_error
        h = output.hidden
        norms = (
            h["user_vectors"].pow(2).sum(-1)
            + h["item_vectors"].pow(2).sum(-1)
            + h["user_bias"].pow(2)
            + h["item_bias"].pow(2)
        )
        return squared_error + self.l2 * norms.mean()

    def fused_step(self, optimizer: torch.optim.Optimizer) -> FusedMFStep | None:
        """The whole training step as one C++ call (``train.fused_step: true``; see
        :mod:`embreg.models.mf_fused_step`), or None where the kernel is off or cannot be built.

        Raises:
            ConfigError: this model or ``optimizer`` cannot take it (sparse tables, no vector dropout, and
                ``sparse-adam`` or plain ``sgd`` are needed); the message says which.
        """
        return fused_mf_step(self, optimizer)

    @torch.no_grad()
    def predict(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Predicted ratings ``(B,)`` in the current mode (call ``eval()`` first for deterministic predictions)."""
        return self(batch).predictions


@register(
    "model",
    "mf",
    config=UserItemConfig,
    tasks=("rating",),
    kinds=("user", "item"),
    embeddings=("uniform", "md"),
    provides=(),
    summary="biased matrix factorisation, squared loss",
    reference="sse-stochastic-shared-embeddings.txt, Sec. 4.1 (MF)",
)
def build_mf(config: UserItemConfig, context: Any) -> BiasedMF:
    """:class:`BiasedMF` over the recipe's user/item tables, with its user/item index transforms."""
    users, items = user_item_tables(config, context)
    user_bias, item_bias = zero_table(context.num_ids("user")), zero_table(context.num_ids("item"))
    return BiasedMF(
        users,
        items,
        user_bias,
        item_bias,
        global_mean=context.adapter.global_mean(context.prepared),
        user_transform=context.transforms.get("user"),
        item_transform=context.transforms.get("item"),
        dropout=config.dropout,
        l2=config.l2,
    )

"""Multiplicative (Luong) attention: the bilinear "general" score and the plain dot score.

Reference: nlp-best-practices.txt, "Attention" (multiplicative attention, Luong et al., 2015, Sec. 3.1, eq. 8):
``f_att(h_i, s_j) = h_i^T W_a s_j`` ("general"); with ``W_a = I`` it is Luong's "dot" score ``h_i^T s_j``.
``a_i = softmax_j f_att(h_i, s_j)``, ``c_i = sum_j a_ij s_j``. Cheaper than additive attention: one matrix product.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.nn.attention._masking import as_batched_query, check_keys_values, expand_mask, masked_softmax

SCORES = ("general", "dot")


def multiplicative_attention(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    weight: torch.Tensor | None = None,
    *,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multiplicative attention: scores ``h_i^T W_a s_j`` (``weight=None``: ``h_i^T s_j``).

    Args:
        query: ``h`` ``(B, Dq)`` or ``(B, Lq, Dq)``.
        keys: ``s`` ``(B, Lk, Dk)``; values: ``(B, Lk, Dv)``.
        weight: ``W_a`` ``(Dq, Dk)``; ``None`` for the dot score (then ``Dq == Dk``).
        mask: ``(B, Lk)`` or ``(B, Lq, Lk)``, True at real positions.

    Returns:
        ``(context, weights)``: ``(B, Dv)``, ``(B, Lk)`` for a 2-D query, else ``(B, Lq, Dv)``, ``(B, Lq, Lk)``.

    Example:
        >>> ctx, a = multiplicative_attention(torch.ones(1, 2), torch.eye(2)[None], torch.eye(2)[None])
        >>> a
        tensor([[0.5000, 0.5000]])
    """
    query, step = as_batched_query(query)
    check_keys_values(keys, values, query.shape[0])
    projected = query if weight is None else query @ weight
    if projected.shape[-1] != keys.shape[-1]:
        raise EmbregError(
            f"the query's width {projected.shape[-1]} must equal the keys' width {keys.shape[-1]} "
            "(the dot score needs Dq == Dk; the general score needs weight (Dq, Dk))"
        )
    scores = projected @ keys.transpose(1, 2)
    weights = masked_softmax(scores, expand_mask(mask, scores))
    context = weights @ values
    return (context.squeeze(1), weights.squeeze(1)) if step else (context, weights)


class MultiplicativeAttention(nn.Module):
    """Module form of :func:`multiplicative_attention`.

    Args:
        query_dim, key_dim: ``Dq`` and ``Dk``.
        score: ``"general"`` (a learned ``W_a (Dq, Dk)``) or ``"dot"`` (no parameters; needs ``Dq == Dk``).

    Shapes:
        ``query (B, Dq) | (B, Lq, Dq)``, ``keys (B, Lk, Dk)``, ``values (B, Lk, Dv)`` (default ``keys``) ->
        ``context (B, Dv) | (B, Lq, Dv)``, ``weights (B, Lk) | (B, Lq, Lk)``.

    Example:
        >>> attn = MultiplicativeAttention(4, 3)
        >>> ctx, a = attn(torch.randn(2, 6, 4), torch.randn(2, 5, 3))
        >>> tuple(ctx.shape), tuple(a.shape)
        ((2, 6, 3), (2, 6, 5))
    """

    def __init__(self, query_dim: int, key_dim: int, *, score: Literal["general", "dot"] = "general") -> None:
        super().__init__()
        if score not in SCORES:
            raise EmbregError(f"score={score!r} is not one of {SCORES}")
        if score == "dot" and query_dim != key_dim:
            raise EmbregError(f"the dot score needs query_dim == key_dim, got {query_dim} and {key_dim}")
        self.score = score
        self.weight = nn.Parameter(torch.empty(query_dim, key_dim)) if score == "general" else None
        if self.weight is not None:
            nn.init.xavier_uniform_(self.weight)

    def forward(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return multiplicative_attention(query, keys, keys if values is None else values, self.weight, mask=mask)

    def extra_repr(self) -> str:
        return f"score={self.score!r}"

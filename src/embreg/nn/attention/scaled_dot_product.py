"""Scaled dot-product attention.

Reference: nlp-best-practices.txt, "Attention" ("scale f_att(h_i, s_j) by 1/sqrt(d_h)", Vaswani et al., 2017,
Sec. 3.2.1, eq. 1): ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``. Unlike
``torch.nn.functional.scaled_dot_product_attention``, a query whose keys are all padding gets a zero context (not
NaN), and the weights are returned.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.nn.attention._masking import as_batched_query, check_keys_values, expand_mask, masked_softmax


def scaled_dot_product_attention(
    query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(Q K^T / sqrt(d_k)) V`` with a padding mask.

    Args:
        query: ``Q`` ``(B, d_k)`` or ``(B, Lq, d_k)``; keys: ``K`` ``(B, Lk, d_k)``; values: ``V`` ``(B, Lk, Dv)``.
        mask: ``(B, Lk)`` or ``(B, Lq, Lk)``, True at real positions (e.g. a causal mask as ``(B, L, L)``).

    Returns:
        ``(context, weights)``: ``(B, Dv)``, ``(B, Lk)`` for a 2-D query, else ``(B, Lq, Dv)``, ``(B, Lq, Lk)``.

    Example:
        >>> q = torch.tensor([[[2.0, 0.0]]]); k = torch.eye(2)[None]
        >>> scaled_dot_product_attention(q, k, k)[1]  # scores 2/sqrt(2) and 0
        tensor([[[0.8044, 0.1956]]])
    """
    query, step = as_batched_query(query)
    check_keys_values(keys, values, query.shape[0])
    if query.shape[-1] != keys.shape[-1]:
        raise EmbregError(f"the query's width {query.shape[-1]} must equal the keys' width {keys.shape[-1]}")
    scores = query @ keys.transpose(1, 2) / math.sqrt(keys.shape[-1])
    weights = masked_softmax(scores, expand_mask(mask, scores))
    context = weights @ values
    return (context.squeeze(1), weights.squeeze(1)) if step else (context, weights)


class ScaledDotProductAttention(nn.Module):
    """Module form of :func:`scaled_dot_product_attention` (no parameters; project Q, K, V before it as needed).

    Shapes:
        ``query (B, d_k) | (B, Lq, d_k)``, ``keys (B, Lk, d_k)``, ``values (B, Lk, Dv)`` (default ``keys``) ->
        ``context (B, Dv) | (B, Lq, Dv)``, ``weights (B, Lk) | (B, Lq, Lk)``.

    Example:
        >>> ctx, a = ScaledDotProductAttention()(torch.randn(2, 3, 4), torch.randn(2, 5, 4))
        >>> tuple(ctx.shape), tuple(a.shape)
        ((2, 3, 4), (2, 3, 5))
    """

    def forward(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return scaled_dot_product_attention(query, keys, keys if values is None else values, mask=mask)

"""Additive (Bahdanau) attention, optionally conditioned on a coverage vector.

Reference: nlp-best-practices.txt, "Attention" (additive attention, Bahdanau et al., 2015, eq. for ``e_ij``):
``f_att(h_i, s_j) = v_a^T tanh(W_1 h_i + W_2 s_j)`` -- the document's split form of ``v_a^T tanh(W_a [h_i; s_j])``
with ``W_a = [W_1, W_2]`` -- ``a_i = softmax_j f_att(h_i, s_j)`` and ``c_i = sum_j a_ij s_j``. "Modelling coverage"
(Tu et al., 2016; See et al., 2017, eq. 10-11): the coverage vector ``c_i = sum_{t<i} a_t`` enters the score as
``v_a^T tanh(W_1 h_i + W_2 s_j + W_3 c_i)``; its entry for source position ``j`` is a scalar, so ``W_3`` acts per
position as one learned vector ``w_c`` (``W_3 c_i`` restricted to position ``j`` is ``w_c * c_ij``, See et al.'s
form), which keeps the block independent of the source length.
"""

from __future__ import annotations

import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.nn.attention._masking import as_batched_query, check_keys_values, expand_mask, masked_softmax


def additive_scores(
    query: torch.Tensor,
    keys: torch.Tensor,
    w_query: torch.Tensor,
    w_key: torch.Tensor,
    v: torch.Tensor,
    *,
    coverage: torch.Tensor | None = None,
    w_coverage: torch.Tensor | None = None,
) -> torch.Tensor:
    """Unnormalised scores ``v^T tanh(W_1 h_i + W_2 s_j [+ w_c c_ij])`` ``(B, Lq, Lk)``.

    Args:
        query: ``h`` ``(B, Lq, Dq)``.
        keys: ``s`` ``(B, Lk, Dk)``.
        w_query: ``W_1`` ``(A, Dq)``; w_key: ``W_2`` ``(A, Dk)``; v: ``v_a`` ``(A,)``.
        coverage: ``(B, Lk)`` or ``(B, Lq, Lk)`` accumulated attention; needs ``w_coverage`` ``(A,)``.

    Example:
        >>> additive_scores(torch.ones(1, 1, 2), torch.ones(1, 3, 2), torch.eye(2), torch.eye(2), torch.ones(2)).shape
        torch.Size([1, 1, 3])
    """
    projected = (query @ w_query.T).unsqueeze(2) + (keys @ w_key.T).unsqueeze(1)  # (B, Lq, Lk, A)
    if coverage is not None:
        if w_coverage is None:
            raise EmbregError("coverage was given without w_coverage, the weight that conditions the score on it")
        batch, queries, length = projected.shape[:3]
        if coverage.dim() == 2 and tuple(coverage.shape) == (batch, length):
            coverage = coverage.unsqueeze(1)
        elif coverage.dim() != 3 or tuple(coverage.shape) != (batch, queries, length):
            raise EmbregError(
                f"coverage has shape {tuple(coverage.shape)}; expected (B, Lk) = {(batch, length)} or "
                f"(B, Lq, Lk) = {(batch, queries, length)}"
            )
        projected = projected + coverage.unsqueeze(-1) * w_coverage
    return torch.tanh(projected) @ v


def additive_attention(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    w_query: torch.Tensor,
    w_key: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    coverage: torch.Tensor | None = None,
    w_coverage: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Additive attention: context vectors and attention weights.

    Args:
        query: ``(B, Dq)`` (one decoder step) or ``(B, Lq, Dq)``.
        keys: ``(B, Lk, Dk)``; values: ``(B, Lk, Dv)`` (pass the encoder states as both for Bahdanau's form).
        w_query, w_key, v: ``W_1 (A, Dq)``, ``W_2 (A, Dk)``, ``v_a (A,)``.
        mask: ``(B, Lk)`` or ``(B, Lq, Lk)``, True at real positions; padding gets weight 0, a fully masked row
            gets zeros.
        coverage: ``(B, Lk)`` or ``(B, Lq, Lk)``, the sum of past attention weights (see :func:`update_coverage`);
            with ``w_coverage`` ``(A,)``.

    Returns:
        ``(context, weights)``: ``(B, Dv)`` and ``(B, Lk)`` for a 2-D query, else ``(B, Lq, Dv)`` and
        ``(B, Lq, Lk)``.

    Example:
        >>> ctx, a = additive_attention(torch.randn(2, 4), torch.randn(2, 5, 3), torch.randn(2, 5, 3),
        ...                             torch.randn(6, 4), torch.randn(6, 3), torch.randn(6))
        >>> tuple(ctx.shape), tuple(a.shape), bool(torch.allclose(a.sum(-1), torch.ones(2)))
        ((2, 3), (2, 5), True)
    """
    query, step = as_batched_query(query)
    check_keys_values(keys, values, query.shape[0])
    scores = additive_scores(query, keys, w_query, w_key, v, coverage=coverage, w_coverage=w_coverage)
    weights = masked_softmax(scores, expand_mask(mask, scores))
    context = weights @ values
    return (context.squeeze(1), weights.squeeze(1)) if step else (context, weights)


def update_coverage(coverage: torch.Tensor | None, weights: torch.Tensor) -> torch.Tensor:
    """The document's coverage vector after one more step: ``c_{i+1} = c_i + a_i`` (``c_1 = 0``).

    Args:
        coverage: ``(B, Lk)`` or ``None`` before the first step.
        weights: this step's attention weights ``(B, Lk)``.

    Example:
        >>> update_coverage(None, torch.tensor([[0.5, 0.5]]))
        tensor([[0.5000, 0.5000]])
    """
    return weights if coverage is None else coverage + weights


class AdditiveAttention(nn.Module):
    """Module form of :func:`additive_attention`: ``W_1``, ``W_2`` (no bias, as in the document's formula), ``v_a``
    and, with ``coverage=True``, the coverage weight ``w_c``.

    Args:
        query_dim: ``Dq``; key_dim: ``Dk``; attn_dim: ``A``, the width of the hidden layer of the score.
        coverage: condition the score on a coverage vector (a translation decoder passes the running sum of its
            attention weights, :func:`update_coverage`). Without it, passing ``coverage`` is an error; with it, a
            call without ``coverage`` uses zeros (the first decoding step).

    Shapes:
        ``query (B, Dq) | (B, Lq, Dq)``, ``keys (B, Lk, Dk)``, ``values (B, Lk, Dv)`` (default: ``keys``) ->
        ``context (B, Dv) | (B, Lq, Dv)``, ``weights (B, Lk) | (B, Lq, Lk)``.

    Example:
        >>> attn = AdditiveAttention(4, 3, 8, coverage=True)
        >>> keys = torch.randn(2, 5, 3)
        >>> ctx, a = attn(torch.randn(2, 4), keys, mask=torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]))
        >>> ctx2, a2 = attn(torch.randn(2, 4), keys, coverage=update_coverage(None, a))
        >>> tuple(ctx.shape), a[0, 3:].tolist()
        ((2, 3), [0.0, 0.0])
    """

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int, *, coverage: bool = False) -> None:
        super().__init__()
        if min(query_dim, key_dim, attn_dim) < 1:
            raise EmbregError(f"query_dim={query_dim}, key_dim={key_dim}, attn_dim={attn_dim} must all be >= 1")
        self.w_query = nn.Linear(query_dim, attn_dim, bias=False)
        self.w_key = nn.Linear(key_dim, attn_dim, bias=False)
        self.v = nn.Parameter(torch.empty(attn_dim).uniform_(-(attn_dim**-0.5), attn_dim**-0.5))
        self.w_coverage = nn.Parameter(torch.empty(attn_dim).uniform_(-1.0, 1.0)) if coverage else None

    def forward(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        coverage: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if coverage is not None and self.w_coverage is None:
            raise EmbregError("this AdditiveAttention was built with coverage=False; build it with coverage=True")
        if coverage is None and self.w_coverage is not None:
            coverage = keys.new_zeros(keys.shape[:2])
        return additive_attention(
            query,
            keys,
            keys if values is None else values,
            self.w_query.weight,
            self.w_key.weight,
            self.v,
            mask=mask,
            coverage=coverage,
            w_coverage=self.w_coverage,
        )

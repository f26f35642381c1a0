"""Structured self-attentive sentence embedding (Lin et al., 2017) and its Frobenius penalty.

Reference: nlp-best-practices.txt, "Attention" > "Self-attention": for the hidden states ``H`` ``(T, D)`` of one
sentence,

    A = softmax(W_s2 tanh(W_s1 H^T))     (r, T), the softmax over the T positions,
    M = A H                              (r, D), r "hops" (views) of the sentence,
    P = ||A A^T - I||_F^2                the penalty that keeps the r attention rows apart.

(the document writes ``V_a`` for ``W_s2`` and ``W_a`` for ``W_s1``.) Padding positions get ``-inf`` before the
softmax, so they never receive attention weight; the penalty needs no mask (their weights are exactly 0).

Cost: two matrix products per position for ``A``, one batched product for ``M``; the penalty is one
``(r, T) x (T, r)`` product per sentence.

Example:
    >>> torch.manual_seed(0) is not None
    True
    >>> block = SelfAttentiveEmbedding(dim=6, attn_dim=5, hops=3)
    >>> hidden, mask = torch.randn(2, 4, 6), torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    >>> embedding, weights = block(hidden, mask)
    >>> embedding.shape, weights.shape, weights[1, :, 2:].abs().sum().item()
    (torch.Size([2, 3, 6]), torch.Size([2, 3, 4]), 0.0)
    >>> attention_penalty(weights).shape
    torch.Size([2])
"""

from __future__ import annotations

import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.nn.attention._masking import masked_softmax

__all__ = ["SelfAttentiveEmbedding", "self_attentive_weights", "attention_penalty"]


def self_attentive_weights(
    hidden: torch.Tensor, w_s1: torch.Tensor, w_s2: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """The attention matrix ``A = softmax(W_s2 tanh(W_s1 H^T))`` of each sentence of a batch.

    Args:
        hidden: ``(B, T, D)`` hidden states ``H``.
        w_s1: ``(d_a, D)``.
        w_s2: ``(r, d_a)``.
        mask: ``(B, T)``, nonzero at tokens, 0 at padding (``None``: no padding). Every row needs a token.

    Returns:
        ``(B, r, T)``: each of the ``r`` rows sums to 1 over the tokens and is exactly 0 at padding.

    Raises:
        EmbregError: shapes that do not fit, or a sequence whose mask has no token.

    Example:
        >>> h = torch.zeros(1, 3, 2)
        >>> self_attentive_weights(h, torch.ones(4, 2), torch.ones(2, 4), torch.tensor([[1, 1, 0]]))[0, 0].tolist()
        [0.5, 0.5, 0.0]
    """
    if hidden.dim() != 3 or w_s1.dim() != 2 or w_s2.dim() != 2 or w_s1.shape[1] != hidden.shape[2]:
        raise EmbregError(
            f"hidden (B, T, D)={tuple(hidden.shape)}, W_s1 (d_a, D)={tuple(w_s1.shape)} and W_s2 (r, d_a)="
            f"{tuple(w_s2.shape)} do not fit"
        )
    if w_s2.shape[1] != w_s1.shape[0]:
        raise EmbregError(f"W_s2 (r, d_a)={tuple(w_s2.shape)} does not fit W_s1 (d_a, D)={tuple(w_s1.shape)}")
    scores = torch.tanh(hidden @ w_s1.T) @ w_s2.T  # (B, T, r)
    scores = scores.transpose(1, 2)  # (B, r, T)
    if mask is not None:
        if mask.shape != hidden.shape[:2]:
            raise EmbregError(f"mask shape {tuple(mask.shape)} != hidden's (B, T) {tuple(hidden.shape[:2])}")
        tokens = mask.bool()
        if not bool(tokens.any(dim=1).all()):
            raise EmbregError("every sequence needs at least one unmasked position (a mask row is all padding)")
        return masked_softmax(scores, tokens.unsqueeze(1))
    return torch.softmax(scores, dim=-1)


def attention_penalty(weights: torch.Tensor) -> torch.Tensor:
    """``P = ||A A^T - I||_F^2`` of each attention matrix (nlp-best-practices.txt, "Self-attention").

    Args:
        weights: ``(B, r, T)`` attention matrices ``A`` (rows summing to 1).

    Returns:
        ``(B,)`` penalties, 0 exactly when the ``r`` rows are one-hot on distinct positions.

    Example:
        >>> attention_penalty(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])).item()
        0.0
        >>> attention_penalty(torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])).item()  # the two hops agree
        2.0
    """
    if weights.dim() != 3:
        raise EmbregError(f"weights must be (B, r, T), got shape {tuple(weights.shape)}")
    gram = weights @ weights.transpose(1, 2)  # (B, r, r)
    eye = torch.eye(weights.shape[1], dtype=weights.dtype, device=weights.device)
    return (gram - eye).pow(2).sum(dim=(1, 2))


class SelfAttentiveEmbedding(nn.Module):
    """``r`` attention hops over a sentence's hidden states: ``(B, T, D) -> M (B, r, D), A (B, r, T)``.

    Args:
        dim: width ``D`` of the hidden states.
        attn_dim: ``d_a``, rows of ``W_s1`` (Lin et al. used 350).
        hops: ``r``, rows of ``W_s2`` (Lin et al. used 30).

    Both matrices are bias-free, as in the formula.

    Example:
        >>> block = SelfAttentiveEmbedding(dim=4, attn_dim=3, hops=2)
        >>> m, a = block(torch.randn(5, 7, 4))
        >>> m.shape, a.sum(dim=-1).allclose(torch.ones(5, 2))
        (torch.Size([5, 2, 4]), True)
    """

    def __init__(self, dim: int, attn_dim: int = 350, hops: int = 30) -> None:
        super().__init__()
        for name, value in (("dim", dim), ("attn_dim", attn_dim), ("hops", hops)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise EmbregError(f"{name}={value!r} must be an int >= 1")
        self.hops = hops
        self.w_s1 = nn.Linear(dim, attn_dim, bias=False)
        self.w_s2 = nn.Linear(attn_dim, hops, bias=False)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        weights = self_attentive_weights(hidden, self.w_s1.weight, self.w_s2.weight, mask)
        return weights @ hidden, weights

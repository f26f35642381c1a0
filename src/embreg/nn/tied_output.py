"""Tied input/output embeddings: the softmax layer reuses the embedding matrix.

Reference: nlp-best-practices.txt, "Tying input and output embeddings" (Inan et al., 2016; Press & Wolf, 2017):
"input and output parameters can be shared ... particularly useful on small datasets".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def tied_logits(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Logits ``h @ weight.T + bias`` with the ``(V, D)`` embedding matrix as output weights.

    Args:
        h: ``(..., D)`` hidden states.
        weight: ``(V, D)`` embedding matrix.
        bias: optional ``(V,)`` output bias.

    Returns:
        ``(..., V)`` logits.

    Example:
        >>> tied_logits(torch.ones(2, 3), torch.eye(3)).shape
        torch.Size([2, 3])
    """
    return F.linear(h, weight, bias)


class TiedOutput(nn.Module):
    """Output layer whose weight *is* ``embedding.weight`` (one parameter, two uses), plus its own bias.

    Args:
        embedding: the input embedding (``nn.Embedding`` or anything with a ``(V, D)`` ``weight``).
        bias: learn an output bias ``(V,)``.

    Example:
        >>> emb = nn.Embedding(10, 4)
        >>> head = TiedOutput(emb)
        >>> head(torch.randn(2, 4)).shape, head.weight is emb.weight
        (torch.Size([2, 10]), True)
    """

    def __init__(self, embedding: nn.Module, *, bias: bool = True) -> None:
        super().__init__()
        self.embedding = embedding
        rows = _weight_of(embedding).shape[0]
        self.bias = nn.Parameter(torch.zeros(rows)) if bias else None

    @property
    def weight(self) -> torch.Tensor:
        return _weight_of(self.embedding)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return tied_logits(h, _weight_of(self.embedding), self.bias)


def _weight_of(embedding: nn.Module) -> torch.Tensor:
    """``embedding.weight``, read at every use so that the tie follows the embedding's current parameter."""
    weight = embedding.weight
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"{type(embedding).__name__}.weight is a {type(weight).__name__}, not a tensor")
    return weight

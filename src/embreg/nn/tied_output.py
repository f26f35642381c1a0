"""Tied input/output embeddings: the softmax layer reuses the embedding matrix.

Reference: nlp-best-practices.txt, "Tying input and output embeddings" (Inan et al., 2016; Press & Wolf, 2017):
"input and output parameters can be shared ... particularly useful on small datasets".

The tied table may be a plain ``nn.Embedding`` or a mixed-dimension one
(:class:`~embreg.embeddings.MixedDimensionEmbedding`): the output weights are then every word's projected vector
``E_i[j] @ P_i`` (its ``full_weight()``), so the softmax trains the same blocks and projections as the input.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["TiedOutput", "tied_logits", "embedding_matrix"]


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
    """Output layer whose weight *is* the embedding's matrix (one set of parameters, two uses), plus its own bias.

    Args:
        embedding: the input embedding: ``nn.Embedding`` (or anything with a ``(V, D)`` ``weight``), or a table
            with ``full_weight()`` (a mixed-dimension table: the weight is its projected ``(V, D)`` matrix, computed
            at every call and differentiable in every block and projection).
        bias: learn an output bias ``(V,)``.

    Example:
        >>> emb = nn.Embedding(10, 4)
        >>> head = TiedOutput(emb)
        >>> head(torch.randn(2, 4)).shape, head.weight is emb.weight
        (torch.Size([2, 10]), True)
        >>> from embreg.embeddings import MixedDimensionEmbedding
        >>> TiedOutput(MixedDimensionEmbedding([3, 7], [4, 2], base_dim=4))(torch.randn(2, 4)).shape
        torch.Size([2, 10])
    """

    def __init__(self, embedding: nn.Module, *, bias: bool = True) -> None:
        super().__init__()
        self.embedding = embedding
        rows = embedding_matrix(embedding).shape[0]
        self.bias = nn.Parameter(torch.zeros(rows)) if bias else None

    @property
    def weight(self) -> torch.Tensor:
        return embedding_matrix(self.embedding)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        # read at every call, so that the tie follows the embedding's current parameters
        return tied_logits(h, embedding_matrix(self.embedding), self.bias)


def embedding_matrix(embedding: nn.Module) -> torch.Tensor:
    """The ``(V, D)`` matrix of every row of ``embedding``: ``full_weight()`` where the table has one (mixed
    dimensions: the projected rows), else ``weight``; differentiable either way.

    Raises:
        TypeError: the module has neither, or its ``weight`` is not a tensor.

    Example:
        >>> embedding_matrix(nn.Embedding(5, 3)).shape
        torch.Size([5, 3])
    """
    full_weight = getattr(embedding, "full_weight", None)
    if callable(full_weight):
        return full_weight()
    return _weight_of(embedding)


def _weight_of(embedding: nn.Module) -> torch.Tensor:
    """``embedding.weight``, checked to be a tensor."""
    weight = embedding.weight
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"{type(embedding).__name__}.weight is a {type(weight).__name__}, not a tensor")
    return weight

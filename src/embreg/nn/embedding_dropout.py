"""Embedding dropout: drop whole words (rows of the embedding matrix), the same for every occurrence in a batch.

Reference: the AWD-LSTM regularisers the paper builds on (dropout-explicit-implicit-regularization.txt, Sec. 5.1 and
App. C: "we base our model and code on Merity et al."); a dropped word type is all-zero at every position where it
occurs, and kept rows are scaled by ``1 / (1 - q)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from embreg.nn._checks import check_probability
from embreg.nn.dropout_control import DropoutBlock
from embreg.nn.tied_output import embedding_matrix

__all__ = ["EmbeddingDropout", "embedding_dropout"]


def embedding_dropout(
    weight: torch.Tensor,
    ids: torch.Tensor,
    q: float,
    *,
    training: bool = True,
    padding_idx: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Looks up ``ids`` in ``weight`` after dropping whole rows with probability ``q``.

    Args:
        weight: ``(V, D)`` embedding matrix.
        ids: LongTensor of any shape, e.g. ``(B, T)``.
        q: row drop probability in ``[0, 1)``.
        training: when False (or ``q == 0``) this is a plain lookup.
        padding_idx: forwarded to :func:`torch.nn.functional.embedding`.
        generator: optional torch generator.

    Returns:
        ``ids.shape + (D,)``.

    Example:
        >>> w = torch.ones(5, 2)
        >>> out = embedding_dropout(w, torch.tensor([[1, 1, 2]]), 0.5)
        >>> bool((out[0, 0] == out[0, 1]).all())  # the same word gets the same mask
        True
    """
    q = check_probability(q)
    if training and q > 0.0:
        keep = torch.full((weight.shape[0], 1), 1.0 - q, device=weight.device, dtype=weight.dtype)
        weight = weight * (torch.bernoulli(keep, generator=generator) / (1.0 - q))
    return F.embedding(ids, weight, padding_idx=padding_idx)


class EmbeddingDropout(DropoutBlock):
    """Wraps an embedding table so that training lookups drop whole word types.

    The wrapped module keeps its own weight, so tying it to an output layer (:class:`TiedOutput`) keeps working.
    A mixed-dimension table (one with ``full_weight()``) is looked up directly while no rows are dropped, and
    through its projected ``(V, D)`` matrix while they are.

    Args:
        embedding: the ``nn.Embedding`` (or mixed-dimension table) to wrap.
        q: row drop probability in ``[0, 1)``.

    Example:
        >>> emb = EmbeddingDropout(nn.Embedding(100, 8), q=0.1)
        >>> emb(torch.randint(0, 100, (4, 7))).shape
        torch.Size([4, 7, 8])
    """

    def __init__(self, embedding: nn.Module, q: float) -> None:
        super().__init__(q)
        self.embedding = embedding

    @property
    def weight(self) -> torch.Tensor:
        return embedding_matrix(self.embedding)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if callable(getattr(self.embedding, "full_weight", None)):  # mixed dimensions: no weight matrix of its own
            if not self.active:
                return self.embedding(ids)
            return embedding_dropout(embedding_matrix(self.embedding), ids, self.q, training=True)
        padding_idx = getattr(self.embedding, "padding_idx", None)
        return embedding_dropout(
            embedding_matrix(self.embedding), ids, self.q, training=self.active, padding_idx=padding_idx
        )

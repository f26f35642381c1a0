"""Make any embedding module an SSE embedding: swap the ids, then look them up."""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.sse.base import IndexTransform


class SSEEmbedding(nn.Module):
    """An embedding whose input ids pass through an SSE index transform first.

    ``forward(ids) = embedding(transform(ids))``: the randomised look-up layer of
    sse-stochastic-shared-embeddings.txt, Figure 1 and Algorithm 1 (line 8). The
    transform is the identity in eval mode, so evaluation sees the plain embedding;
    gradients reach only the rows that were actually looked up (the swapped-in ones).

    Args:
        embedding: any module mapping ids to vectors (``nn.Embedding``,
            ``nn.EmbeddingBag``, a mixed-dimension embedding, ...). When it has a
            ``num_embeddings`` attribute, it must equal the transform's.
        transform: the index transform, e.g. :class:`~embreg.sse.SSE` or
            :class:`~embreg.sse.SSEGraph`.

    Shapes:
        ids: (...) integer ids; output: whatever ``embedding`` returns, e.g. (..., D).
        Extra positional and keyword arguments (e.g. ``offsets`` of an
        ``nn.EmbeddingBag``) are passed to the embedding unchanged.

    Example:
        >>> from embreg.sse import SSE
        >>> emb = SSEEmbedding(nn.Embedding(1000, 64), SSE(1000, p=0.01, seed=0))
        >>> emb(torch.randint(0, 1000, (8, 20))).shape
        torch.Size([8, 20, 64])
    """

    def __init__(self, embedding: nn.Module, transform: IndexTransform) -> None:
        super().__init__()
        if not isinstance(embedding, nn.Module):
            raise EmbregError(f"embedding must be an nn.Module, got {type(embedding).__name__}")
        if not isinstance(transform, IndexTransform):
            raise EmbregError(f"transform must be an IndexTransform, got {type(transform).__name__}")
        rows = getattr(embedding, "num_embeddings", None)
        if rows is not None and int(rows) != transform.num_embeddings:
            raise EmbregError(
                f"transform.num_embeddings={transform.num_embeddings} does not match the embedding's "
                f"num_embeddings={int(rows)}; they must be equal"
            )
        self.embedding = embedding
        self.transform = transform

    @property
    def num_embeddings(self) -> int:
        """Number of ids, N."""
        return self.transform.num_embeddings

    @property
    def embedding_dim(self) -> int:
        """Output dimension of the wrapped embedding (when it defines ``embedding_dim``)."""
        if not hasattr(self.embedding, "embedding_dim"):
            raise AttributeError(f"{type(self.embedding).__name__} has no attribute 'embedding_dim'")
        # an int attribute of the wrapped module, which nn.Module's typing cannot name
        return cast(int, self.embedding.embedding_dim)

    @property
    def weight(self) -> torch.Tensor:
        """Weight of the wrapped embedding (when it defines ``weight``)."""
        if not hasattr(self.embedding, "weight"):
            raise AttributeError(f"{type(self.embedding).__name__} has no attribute 'weight'")
        weight = self.embedding.weight
        if not isinstance(weight, torch.Tensor):
            raise TypeError(f"{type(self.embedding).__name__}.weight is a {type(weight).__name__}, not a tensor")
        return weight

    def forward(self, ids: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Look up ``transform(ids)`` in the embedding."""
        return self.embedding(self.transform(ids), *args, **kwargs)

"""Stochastic Shared Embeddings (SSE): index-level regularisers, ids -> ids.

Paper: sse-stochastic-shared-embeddings.txt. During training each id is swapped,
with a small probability p, for another id: uniformly (SSE-SE, eq. 5) or
favouring neighbours in a knowledge graph (SSE-Graph, eq. 3). Swapping the ids
before the look-up is the same as swapping the embeddings (Algorithm 1).

Example:
    >>> import torch
    >>> from torch import nn
    >>> from embreg.sse import SSE, SSEEmbedding
    >>> emb = SSEEmbedding(nn.Embedding(1000, 64), SSE(1000, p=0.01, seed=0))
    >>> emb(torch.randint(0, 1000, (4, 10))).shape
    torch.Size([4, 10, 64])
"""

from embreg.sse import functional
from embreg.sse.base import IndexTransform
from embreg.sse.embedding import SSEEmbedding
from embreg.sse.graph import NeighbourGraph
from embreg.sse.graph_transform import SSEGraph
from embreg.sse.label import LabelSSE
from embreg.sse.se import SSE

__all__ = ["SSE", "SSEGraph", "LabelSSE", "SSEEmbedding", "IndexTransform", "NeighbourGraph", "functional"]

"""SSEEmbedding: embedding(transform(ids)); gradients reach only the looked-up rows."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.sse import SSE, NeighbourGraph, SSEEmbedding, SSEGraph


def test_two_line_use_and_exposed_attributes() -> None:
    emb = SSEEmbedding(nn.Embedding(1000, 64), SSE(1000, p=0.01, seed=0))
    assert emb(torch.randint(0, 1000, (8, 20))).shape == (8, 20, 64)
    assert emb.num_embeddings == 1000 and emb.embedding_dim == 64
    assert emb.weight is emb.embedding.weight


def test_eval_output_equals_the_plain_embedding() -> None:
    table = nn.Embedding(50, 8)
    emb = SSEEmbedding(table, SSE(50, p=0.9, seed=0)).eval()
    ids = torch.randint(0, 50, (5, 6))
    torch.testing.assert_close(emb(ids), table(ids))


def test_training_output_looks_up_the_swapped_ids() -> None:
    table = nn.Embedding(50, 8)
    emb = SSEEmbedding(table, SSE(50, p=0.5, seed=9))
    twin = SSE(50, p=0.5, seed=9)
    ids = torch.randint(0, 50, (40,))
    out = emb(ids)
    torch.testing.assert_close(out, table(twin(ids)))
    assert not torch.allclose(out, table(ids))


def test_gradient_reaches_the_swapped_rows_only() -> None:
    n = 200
    emb = SSEEmbedding(nn.Embedding(n, 4), SSE(n, p=1.0, seed=2))
    ids = torch.arange(0, 20)
    swapped = SSE(n, p=1.0, seed=2)(ids)
    emb(ids).sum().backward()
    rows_with_gradient = set(torch.nonzero(emb.weight.grad.abs().sum(1)).squeeze(1).tolist())
    assert rows_with_gradient == set(swapped.tolist())
    swapped_away = set(ids.tolist()) - set(swapped.tolist())
    assert swapped_away  # the original rows that nothing swapped into get no gradient
    assert rows_with_gradient.isdisjoint(swapped_away)


def test_graph_transform_and_embedding_bag_with_offsets() -> None:
    graph = NeighbourGraph.from_edges([[0, 1], [2, 3]], num_nodes=10)
    emb = SSEEmbedding(nn.EmbeddingBag(10, 3, mode="sum"), SSEGraph(graph, p=0.5, rho=3.0, seed=0))
    out = emb(torch.tensor([1, 2, 4, 5, 9]), torch.tensor([0, 2]))
    assert out.shape == (2, 3)


def test_size_mismatch_raises_naming_both_sizes() -> None:
    with pytest.raises(EmbregError, match=r"num_embeddings=100 .* num_embeddings=99"):
        SSEEmbedding(nn.Embedding(99, 4), SSE(100, p=0.1))


def test_embedding_without_weight_or_dim_reports_attribute_error() -> None:
    class Lookup(nn.Module):
        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return ids.float().unsqueeze(-1)

    emb = SSEEmbedding(Lookup(), SSE(10, p=0.1, seed=0))
    assert emb(torch.tensor([1, 2])).shape == (2, 1)
    assert emb.num_embeddings == 10
    with pytest.raises(AttributeError, match="embedding_dim"):
        _ = emb.embedding_dim
    with pytest.raises(AttributeError, match="weight"):
        _ = emb.weight

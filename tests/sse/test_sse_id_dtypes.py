"""Ids of every integer dtype: a transform is exact where the dtype holds N - 1, and refused, naming the dtype, where
it does not (``SSE(40000)`` on int16 ids once wrote negative ids). Runs on both CPU backends (tests/sse/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from embreg.embeddings import MixedDimensionEmbedding
from embreg.errors import EmbregError
from embreg.sse import SSE, LabelSSE, NeighbourGraph, SSEEmbedding, SSEGraph
from embreg.sse import functional as F

NARROW = [torch.int8, torch.uint8, torch.int16]


def _ring(num_nodes: int) -> NeighbourGraph:
    return NeighbourGraph.from_edges([[k, (k + 1) % num_nodes] for k in range(num_nodes)], num_nodes=num_nodes)


def _draws(num_embeddings: int) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Every ids -> ids entry over N ids, each with a fixed seed (p = 0.5, so the draws mix kept and swapped ids)."""
    graph = _ring(num_embeddings)
    return {
        "sse-se": lambda ids: SSE(num_embeddings, p=0.5, seed=3)(ids),
        "sse-graph": lambda ids: SSEGraph(graph, p=0.5, rho=4.0, seed=3)(ids),
        "label-sse": lambda ids: LabelSSE(num_embeddings, p=0.5, seed=3)(ids),
        "label-sse-padding-class": lambda ids: LabelSSE(num_embeddings, p=0.5, ignore_index=0, seed=3)(ids),
        "functional.sse_se": lambda ids: F.sse_se(ids, num_embeddings, 0.5, torch.Generator().manual_seed(3)),
        "functional.sse_graph": lambda ids: F.sse_graph(ids, graph, 0.5, 4.0, torch.Generator().manual_seed(3)),
    }


@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("name", list(_draws(2)))
def test_a_dtype_that_holds_every_id_gives_the_int64_draws_exactly(dtype: torch.dtype, name: str) -> None:
    num_embeddings = torch.iinfo(dtype).max + 1  # the largest index set the dtype holds: ids up to its max
    draw = _draws(num_embeddings)[name]
    ids = torch.randint(0, num_embeddings, (3000,), generator=torch.Generator().manual_seed(0))
    expected = draw(ids)
    out = draw(ids.to(dtype))
    assert out.dtype == dtype
    assert torch.equal(out.long(), expected)
    assert int(out.min()) >= 0 and (out != ids.to(dtype)).any()


@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("name", list(_draws(2)))
def test_a_dtype_too_narrow_for_the_ids_is_refused_naming_it(dtype: torch.dtype, name: str) -> None:
    num_embeddings = torch.iinfo(dtype).max + 2
    draw = _draws(num_embeddings)[name]
    ids = torch.randint(0, torch.iinfo(dtype).max, (500,), generator=torch.Generator().manual_seed(0)).to(dtype)
    pattern = rf"ids of dtype {dtype} cannot hold ids up to {num_embeddings - 1}; pass int32 or int64 ids"
    with pytest.raises(EmbregError, match=pattern):
        draw(ids)


def test_sse_on_int16_ids_with_40000_ids_is_refused_in_training_and_eval() -> None:
    ids = torch.randint(0, 30000, (64,), dtype=torch.int16)
    sse = SSE(40000, p=0.5, seed=0)
    embedding = SSEEmbedding(nn.Embedding(40000, 4), SSE(40000, p=0.5, seed=0))
    for module in (sse, sse.eval(), embedding, embedding.eval()):
        with pytest.raises(EmbregError, match="ids of dtype torch.int16 cannot hold ids up to 39999"):
            module(ids)


@pytest.mark.parametrize("dtype", NARROW)
def test_sse_embedding_looks_up_the_same_rows_for_every_dtype(dtype: torch.dtype) -> None:
    num_embeddings = torch.iinfo(dtype).max + 1
    torch.manual_seed(0)
    table = MixedDimensionEmbedding([num_embeddings], [3], base_dim=3)  # nn.Embedding takes int64/int32 ids only
    ids = torch.randint(0, num_embeddings, (8, 40), generator=torch.Generator().manual_seed(1))
    expected = SSEEmbedding(table, SSE(num_embeddings, p=0.3, seed=5))(ids)
    assert torch.equal(SSEEmbedding(table, SSE(num_embeddings, p=0.3, seed=5))(ids.to(dtype)), expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.bool, torch.complex64])
def test_non_integer_ids_are_refused_naming_the_dtype_and_the_valid_ones(dtype: torch.dtype) -> None:
    ids = torch.tensor([0, 1, 1]).to(dtype)
    for draw in _draws(10).values():
        with pytest.raises(EmbregError, match=rf"ids have dtype {dtype}; expected one of torch.int64, .*torch.uint8"):
            draw(ids)

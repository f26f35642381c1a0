"""Bad input raises EmbregError naming the bad value and the valid range."""

from __future__ import annotations

import pytest
import torch

from embreg.errors import EmbregError
from embreg.sse import SSE, LabelSSE, NeighbourGraph, SSEEmbedding, SSEGraph
from embreg.sse import functional as F

GRAPH = NeighbourGraph.from_edges([[0, 1], [1, 2]], num_nodes=10)


@pytest.mark.parametrize(
    ("ids", "pattern"),
    [
        (torch.tensor([3, -2, 4]), r"from -2 to -2; valid range is \[0, 10\)"),
        (torch.tensor([[3, 10], [12, 0]]), r"from 10 to 12; valid range is \[0, 10\)"),
        (torch.tensor([-5, 11]), r"2 value\(s\) from -5 to 11"),
    ],
)
def test_ids_out_of_range_raise(ids: torch.Tensor, pattern: str) -> None:
    for transform in (SSE(10, p=0.1, seed=0), SSEGraph(GRAPH, p=0.1, rho=2.0, seed=0)):
        with pytest.raises(EmbregError, match=pattern):
            transform(ids)
        with pytest.raises(EmbregError, match=pattern):
            transform.eval()(ids)  # eval mode checks too, so bad ids never reach the embedding silently
    with pytest.raises(EmbregError, match=pattern):
        F.sse_se(ids, 10, 0.1)
    with pytest.raises(EmbregError, match=pattern):
        F.sse_graph(ids, GRAPH, 0.1, 2.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool])
def test_non_integer_ids_raise(dtype: torch.dtype) -> None:
    ids = torch.tensor([0, 1, 1]).to(dtype)
    with pytest.raises(EmbregError, match=f"dtype {dtype}"):
        SSE(10, p=0.1, seed=0)(ids)
    with pytest.raises(EmbregError, match=f"dtype {dtype}"):
        F.sse_graph(ids, GRAPH, 0.1, 2.0)


def test_non_tensor_ids_raise() -> None:
    with pytest.raises(EmbregError, match="torch.Tensor"):
        SSE(10, p=0.1, seed=0)([1, 2, 3])


@pytest.mark.parametrize(
    ("p", "message"),
    [
        (1.5, r"p=1.5 is outside \[0, 1\]"),
        (-0.1, r"p=-0.1 is outside"),
        (float("nan"), "p=nan is outside"),
        ("0.1", "real number"),
    ],
)
def test_p_outside_unit_interval_raises(p: object, message: str) -> None:
    with pytest.raises(EmbregError, match=message):
        SSE(10, p=p)
    with pytest.raises(EmbregError, match=message):
        SSEGraph(GRAPH, p=p, rho=2.0)
    with pytest.raises(EmbregError, match=message):
        LabelSSE(10, p=p)
    with pytest.raises(EmbregError, match=message):
        F.sse_se(torch.tensor([1]), 10, p)
    with pytest.raises(EmbregError, match=message):
        F.transition_matrix(GRAPH, p, 2.0)


def test_p_setter_validates() -> None:
    sse = SSE(10, p=0.1, seed=0)
    sse.p = 0.2
    assert sse.p == 0.2
    with pytest.raises(EmbregError, match=r"p=2.0 is outside \[0, 1\]"):
        sse.p = 2.0
    assert sse.p == 0.2


@pytest.mark.parametrize(
    ("rho", "message"), [(0.5, "rho=0.5 must be >= 1"), (float("inf"), "rho=inf"), (-3, "rho=-3.0 must be >= 1")]
)
def test_rho_below_one_raises(rho: float, message: str) -> None:
    with pytest.raises(EmbregError, match=message):
        SSEGraph(GRAPH, p=0.1, rho=rho)
    with pytest.raises(EmbregError, match=message):
        F.sse_graph(torch.tensor([1]), GRAPH, 0.1, rho)
    with pytest.raises(EmbregError, match=message):
        F.transition_matrix(GRAPH, 0.1, rho)


@pytest.mark.parametrize("num_embeddings", [1, 0, -4])
def test_too_few_embeddings_raise(num_embeddings: int) -> None:
    with pytest.raises(EmbregError, match=f"num_embeddings={num_embeddings} must be >= 2"):
        SSE(num_embeddings, p=0.1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"seed": -1}, "seed=-1"), ({"seed": 1.5}, "seed=1.5"), ({"rank_offset": -1}, "rank_offset=-1")],
)
def test_bad_seed_or_rank_offset_raise(kwargs: dict, message: str) -> None:
    with pytest.raises(EmbregError, match=message):
        SSE(10, p=0.1, **kwargs)


def test_graph_argument_must_be_a_neighbour_graph() -> None:
    with pytest.raises(EmbregError, match="NeighbourGraph"):
        SSEGraph([[0, 1]], p=0.1, rho=2.0)  # type: ignore[arg-type]
    with pytest.raises(EmbregError, match="NeighbourGraph"):
        F.sse_graph(torch.tensor([0]), None, 0.1, 2.0)  # type: ignore[arg-type]


def test_wrapper_arguments_are_checked() -> None:
    with pytest.raises(EmbregError, match="IndexTransform"):
        SSEEmbedding(torch.nn.Embedding(10, 4), torch.nn.Identity())  # type: ignore[arg-type]
    with pytest.raises(EmbregError, match="nn.Module"):
        SSEEmbedding("table", SSE(10, p=0.1))  # type: ignore[arg-type]

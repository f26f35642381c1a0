"""Every transform is the identity in eval mode and at p = 0, and keeps shape, dtype and device."""

from __future__ import annotations

import pytest
import torch

from embreg.sse import SSE, LabelSSE, NeighbourGraph, SSEGraph
from embreg.sse import functional as F

N = 50


def _transforms(p: float) -> list[torch.nn.Module]:
    graph = NeighbourGraph.from_edges([[i, i + 1] for i in range(N - 1)], num_nodes=N)
    return [SSE(N, p=p, seed=1), SSEGraph(graph, p=p, rho=10.0, seed=1), LabelSSE(N, p=p, seed=1)]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_eval_mode_returns_the_same_tensor(index: int) -> None:
    transform = _transforms(p=0.9)[index].eval()
    ids = torch.randint(0, N, (16, 7))
    out = transform(ids)
    assert out is ids
    assert torch.equal(out, ids)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_zero_p_in_training_returns_the_same_tensor(index: int) -> None:
    transform = _transforms(p=0.0)[index].train()
    ids = torch.randint(0, N, (16, 7))
    assert transform(ids) is ids


def test_functional_zero_p_is_identity() -> None:
    graph = NeighbourGraph.from_edges([[0, 1]], num_nodes=N)
    ids = torch.randint(0, N, (100,))
    assert torch.equal(F.sse_se(ids, N, 0.0), ids)
    assert torch.equal(F.sse_graph(ids, graph, 0.0, 3.0), ids)


@pytest.mark.parametrize("shape", [(64,), (8, 12), (4, 5, 6)])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("index", [0, 1, 2])
def test_shape_dtype_and_device_are_kept(shape: tuple[int, ...], dtype: torch.dtype, index: int) -> None:
    transform = _transforms(p=0.5)[index].train()
    ids = torch.randint(0, N, shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    out = transform(ids)
    assert out.shape == ids.shape
    assert out.dtype == dtype
    assert out.device == ids.device
    assert int(out.min()) >= 0 and int(out.max()) < N
    assert not torch.equal(out, ids)  # p = 0.5 over hundreds of ids: some swap surely happened
    assert (out == ids).any()


def test_training_does_not_modify_the_input_in_place() -> None:
    ids = torch.randint(0, N, (200,))
    before = ids.clone()
    for transform in _transforms(p=1.0):
        transform(ids)
    assert torch.equal(ids, before)


def test_non_contiguous_input_is_handled() -> None:
    ids = torch.randint(0, N, (10, 30)).t()
    assert not ids.is_contiguous()
    out = SSE(N, p=1.0, seed=0)(ids)
    assert out.shape == (30, 10)
    assert not (out == ids).any()  # p = 1 swaps every id and never to itself


def test_empty_input_passes_through() -> None:
    ids = torch.zeros(0, 5, dtype=torch.long)
    for transform in _transforms(p=0.5):
        out = transform(ids)
        assert out.shape == (0, 5)

"""Seeds reproduce draws; the generator state travels in state_dict so resumed runs continue the stream."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from torch import nn

from embreg.sse import SSE, LabelSSE, NeighbourGraph, SSEEmbedding, SSEGraph

N = 100
IDS = torch.randint(0, N, (4000,), generator=torch.Generator().manual_seed(0))


def _draws(transform: nn.Module, steps: int = 3) -> list[torch.Tensor]:
    return [transform(IDS) for _ in range(steps)]


def _make(kind: str, seed: int | None, rank_offset: int = 0) -> nn.Module:
    if kind == "se":
        return SSE(N, p=0.3, seed=seed, rank_offset=rank_offset)
    if kind == "graph":
        graph = NeighbourGraph.from_edges([[i, (i * 7 + 3) % N] for i in range(N) if i != (i * 7 + 3) % N], N)
        return SSEGraph(graph, p=0.3, rho=5.0, seed=seed, rank_offset=rank_offset)
    return LabelSSE(N, p=0.3, seed=seed, rank_offset=rank_offset)


KINDS = ["se", "graph", "label"]


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_reproduces_and_other_seeds_differ(kind: str) -> None:
    first, second = _draws(_make(kind, 7)), _draws(_make(kind, 7))
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert not torch.equal(first[0], first[1])  # the stream advances between calls
    assert not torch.equal(first[0], _make(kind, 8)(IDS))
    assert not torch.equal(first[0], _make(kind, 7, rank_offset=1)(IDS))
    assert torch.equal(_make(kind, 8)(IDS), _make(kind, 7, rank_offset=1)(IDS))  # seed + rank_offset


def test_seed_none_is_reproducible_under_torch_manual_seed() -> None:
    torch.manual_seed(123)
    a = SSE(N, p=0.3)
    torch.manual_seed(123)
    b = SSE(N, p=0.3)
    assert a.seed == b.seed
    assert torch.equal(a(IDS), b(IDS))


def test_manual_seed_restarts_the_stream() -> None:
    sse = SSE(N, p=0.3, seed=5)
    first = sse(IDS)
    sse(IDS)
    assert sse.manual_seed(5) is sse
    assert torch.equal(sse(IDS), first)


@pytest.mark.parametrize("kind", KINDS)
def test_state_dict_resume_continues_the_exact_stream(kind: str) -> None:
    original = _make(kind, 11)
    _draws(original, 2)
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)
    expected = _draws(original, 3)

    resumed = _make(kind, 999)
    buffer.seek(0)
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    assert resumed.seed == 11
    assert all(torch.equal(a, b) for a, b in zip(expected, _draws(resumed, 3)))


def test_state_dict_before_any_draw_restores_the_seed() -> None:
    original = SSE(N, p=0.3, seed=21)
    state = original.state_dict()
    resumed = SSE(N, p=0.3, seed=1)
    resumed.load_state_dict(state)
    assert torch.equal(resumed(IDS), original(IDS))


def test_model_checkpoint_carries_the_transform_state() -> None:
    def build() -> nn.Module:
        return nn.Sequential(SSEEmbedding(nn.Embedding(N, 4), SSE(N, p=0.5, seed=3)))

    model = build()
    model(IDS)
    state = model.state_dict()
    assert "0.transform._extra_state" in state and "0.embedding.weight" in state
    expected = model(IDS)
    resumed = build()
    resumed.load_state_dict(state)
    torch.testing.assert_close(resumed(IDS), expected)


def test_graph_tensors_are_not_saved_in_state_dict() -> None:
    graph = NeighbourGraph.from_edges([[0, 1]], num_nodes=N)
    keys = set(SSEGraph(graph, p=0.1, rho=2.0, seed=0).state_dict())
    assert keys == {"_extra_state"}


def test_deepcopy_continues_the_same_stream() -> None:
    sse = SSE(N, p=0.3, seed=4)
    sse(IDS)
    twin = copy.deepcopy(sse)
    assert torch.equal(sse(IDS), twin(IDS))


def test_checkpoint_of_another_rank_gives_a_distinct_deterministic_stream() -> None:
    rank0 = SSE(N, p=0.3, seed=6, rank_offset=0)
    rank0(IDS)
    state = rank0.state_dict()
    continuation = rank0(IDS)

    def load_as(rank_offset: int) -> SSE:
        module = SSE(N, p=0.3, seed=6, rank_offset=rank_offset)
        module.load_state_dict(state)
        return module

    same_rank, other_rank, other_rank_again = load_as(0), load_as(1), load_as(1)
    assert torch.equal(same_rank(IDS), continuation)
    assert other_rank.rank_offset == 1
    other_draw = other_rank(IDS)
    assert not torch.equal(other_draw, continuation)
    assert torch.equal(other_draw, other_rank_again(IDS))

"""SSE-Graph sampling (eq. 3): empirical transition frequencies match the analytic matrix."""

from __future__ import annotations

import pytest
import torch

from embreg.sse import NeighbourGraph, SSEGraph
from embreg.sse import functional as F
from tests.helpers.sse_helpers import empirical_transitions, row_total_variation, se_matrix

DRAWS = 1_200_000  # one vectorised call; about 130k draws per row on 9 nodes


def _empirical(graph: NeighbourGraph, p: float, rho: float, seed: int) -> torch.Tensor:
    n = graph.num_nodes
    ids = torch.arange(n).repeat(DRAWS // n)
    out = F.sse_graph(ids, graph, p, rho, generator=torch.Generator().manual_seed(seed))
    return empirical_transitions(ids, out, n)


@pytest.mark.parametrize("graph_name", ["hub_and_isolated_graph", "full_hub_graph"])
def test_empirical_frequencies_match_transition_matrix(graph_name: str, request: pytest.FixtureRequest) -> None:
    graph = request.getfixturevalue(graph_name)
    p, rho = 0.5, 6.0
    tv = row_total_variation(_empirical(graph, p, rho, seed=11), F.transition_matrix(graph, p, rho))
    assert float(tv.max()) < 0.01


def test_module_in_training_follows_the_same_law(hub_and_isolated_graph: NeighbourGraph) -> None:
    module = SSEGraph(hub_and_isolated_graph, p=0.4, rho=3.0, seed=2).train()
    ids = torch.arange(9).repeat(DRAWS // 9)
    tv = row_total_variation(empirical_transitions(ids, module(ids), 9), module.transition_matrix())
    assert float(tv.max()) < 0.01


def test_rho_one_matches_sse_se_law(hub_and_isolated_graph: NeighbourGraph) -> None:
    p = 0.5
    tv = row_total_variation(_empirical(hub_and_isolated_graph, p, 1.0, seed=3), se_matrix(9, p))
    assert float(tv.max()) < 0.01


def test_empty_graph_matches_sse_se_law() -> None:
    graph = NeighbourGraph.from_edges([], num_nodes=9)
    p = 0.5
    tv = row_total_variation(_empirical(graph, p, 8.0, seed=4), se_matrix(9, p))
    assert float(tv.max()) < 0.01


def test_swapped_ids_never_map_to_themselves(full_hub_graph: NeighbourGraph) -> None:
    ids = torch.randint(0, 6, (50_000,), generator=torch.Generator().manual_seed(0))
    out = F.sse_graph(ids, full_hub_graph, p=1.0, rho=4.0, generator=torch.Generator().manual_seed(1))
    assert not (out == ids).any()


def test_huge_rho_swaps_only_to_neighbours(hub_and_isolated_graph: NeighbourGraph) -> None:
    ids = torch.arange(8).repeat(5000)  # every node but the isolated one has a neighbour
    out = F.sse_graph(ids, hub_and_isolated_graph, p=1.0, rho=1e12, generator=torch.Generator().manual_seed(2))
    adjacency = hub_and_isolated_graph.adjacency(torch.bool)
    assert bool(adjacency[ids, out].all())


@pytest.mark.filterwarnings("ignore:NeighbourGraph")
def test_int32_ids_on_a_larger_random_graph() -> None:
    generator = torch.Generator().manual_seed(0)
    graph = NeighbourGraph.from_edges(torch.randint(0, 300, (2000, 2), generator=generator), num_nodes=300)
    ids = torch.randint(0, 300, (64, 32), generator=generator, dtype=torch.int32)
    out = F.sse_graph(ids, graph, p=1.0, rho=5.0, generator=generator)
    assert out.dtype == torch.int32 and out.shape == (64, 32)
    assert int(out.min()) >= 0 and int(out.max()) < 300
    assert not (out == ids).any()

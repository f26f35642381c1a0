"""The analytic SSE-Graph matrix: rows sum to 1, diagonal 1 - p, neighbour/non-neighbour ratio rho (eq. 3)."""

from __future__ import annotations

import pytest
import torch

from embreg.sse import NeighbourGraph, SSEGraph
from embreg.sse import functional as F
from tests.helpers.sse_helpers import se_matrix


def _brute_force_matrix(graph: NeighbourGraph, p: float, rho: float) -> torch.Tensor:
    """Eq. 3 written out per entry: weight rho for neighbours, 1 otherwise, scaled to sum to p."""
    n = graph.num_nodes
    neighbours = [set(graph.neighbours(j).tolist()) for j in range(n)]
    matrix = torch.zeros(n, n, dtype=torch.float64)
    for j in range(n):
        weights = [0.0 if k == j else (rho if k in neighbours[j] else 1.0) for k in range(n)]
        total = sum(weights)
        for k in range(n):
            matrix[j, k] = 1.0 - p if k == j else p * weights[k] / total
    return matrix


@pytest.mark.parametrize("graph_name", ["hub_and_isolated_graph", "full_hub_graph"])
@pytest.mark.parametrize(("p", "rho"), [(0.01, 1.0), (0.3, 5.0), (1.0, 50.0)])
def test_matches_brute_force_and_rows_sum_to_one(
    graph_name: str, p: float, rho: float, request: pytest.FixtureRequest
) -> None:
    graph = request.getfixturevalue(graph_name)
    matrix = F.transition_matrix(graph, p, rho)
    assert matrix.dtype == torch.float64 and matrix.shape == (graph.num_nodes, graph.num_nodes)
    torch.testing.assert_close(matrix.sum(1), torch.ones(graph.num_nodes, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(matrix.diagonal(), torch.full((graph.num_nodes,), 1.0 - p, dtype=torch.float64))
    torch.testing.assert_close(matrix, _brute_force_matrix(graph, p, rho), rtol=1e-12, atol=1e-15)


def test_neighbour_to_non_neighbour_ratio_is_rho(hub_and_isolated_graph: NeighbourGraph) -> None:
    rho = 7.5
    matrix = F.transition_matrix(hub_and_isolated_graph, 0.2, rho)
    adjacency = hub_and_isolated_graph.adjacency(torch.bool)
    for j in range(9):
        others = torch.arange(9) != j
        near = matrix[j][adjacency[j]]
        far = matrix[j][~adjacency[j] & others]
        if near.numel() and far.numel():
            torch.testing.assert_close(near / far[0], torch.full_like(near, rho), rtol=1e-12, atol=0)
        # all neighbours share one probability, all non-neighbours another
        assert torch.unique(near).numel() <= 1 and torch.unique(far).numel() <= 1


def test_isolated_node_row_is_eq5(hub_and_isolated_graph: NeighbourGraph) -> None:
    p = 0.2
    row = F.transition_matrix(hub_and_isolated_graph, p, 9.0)[8]
    torch.testing.assert_close(row, se_matrix(9, p)[8])


def test_rho_one_equals_sse_se_matrix(hub_and_isolated_graph: NeighbourGraph) -> None:
    torch.testing.assert_close(F.transition_matrix(hub_and_isolated_graph, 0.35, 1.0), se_matrix(9, 0.35))


def test_module_method_matches_functional(full_hub_graph: NeighbourGraph) -> None:
    module = SSEGraph(full_hub_graph, p=0.25, rho=4.0, seed=0)
    torch.testing.assert_close(module.transition_matrix(), F.transition_matrix(full_hub_graph, 0.25, 4.0))

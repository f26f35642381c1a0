"""NeighbourGraph: symmetric CSR, duplicate merging, self-loop dropping, range checks, free-id lookup."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy import stats

from embreg.errors import EmbregError
from embreg.sse import NeighbourGraph


def test_edges_are_symmetric_and_rows_sorted() -> None:
    graph = NeighbourGraph.from_edges([[3, 0], [0, 1], [2, 0]], num_nodes=5)
    assert graph.indptr.tolist() == [0, 3, 4, 5, 6, 6]
    assert graph.indices.tolist() == [1, 2, 3, 0, 0, 0]
    assert graph.degree.tolist() == [3, 1, 1, 1, 0]
    assert graph.num_edges == 3 and graph.num_nodes == 5
    assert graph.neighbours(0).tolist() == [1, 2, 3]
    adjacency = graph.adjacency()
    assert torch.equal(adjacency, adjacency.t()) and float(adjacency.diagonal().abs().sum()) == 0.0


def test_numpy_torch_and_list_inputs_agree() -> None:
    edges = [[0, 1], [1, 2], [4, 2]]
    graphs = [
        NeighbourGraph.from_edges(edges, 5),
        NeighbourGraph.from_edges(np.array(edges, dtype=np.int32), 5),
        NeighbourGraph.from_edges(torch.tensor(edges), 5),
    ]
    for graph in graphs[1:]:
        assert torch.equal(graph.indptr, graphs[0].indptr)
        assert torch.equal(graph.indices, graphs[0].indices)


def test_both_directions_are_not_reported_as_duplicates() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = NeighbourGraph.from_edges([[0, 1], [1, 0], [1, 2], [2, 1]], num_nodes=3)
    assert graph.num_edges == 2


def test_duplicate_edges_are_merged_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="merged 2 duplicate edge"):
        graph = NeighbourGraph.from_edges([[0, 1], [0, 1], [0, 1], [1, 2]], num_nodes=3)
    assert graph.num_edges == 2
    assert graph.degree.tolist() == [1, 2, 1]


def test_self_loops_are_dropped_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="dropped 2 self-loop"):
        graph = NeighbourGraph.from_edges([[0, 0], [1, 2], [2, 2]], num_nodes=3)
    assert graph.num_edges == 1
    assert graph.neighbours(0).numel() == 0


@pytest.mark.parametrize(("edges", "bad"), [([[0, 1], [-1, 2]], "-1"), ([[0, 1], [2, 7]], "7")])
def test_edge_ids_out_of_range_raise(edges: list[list[int]], bad: str) -> None:
    with pytest.raises(EmbregError, match=rf"{bad}.*\[0, 5\)"):
        NeighbourGraph.from_edges(edges, num_nodes=5)


@pytest.mark.parametrize("num_nodes", [0, 1, -3])
def test_fewer_than_two_nodes_raise(num_nodes: int) -> None:
    with pytest.raises(EmbregError, match=f"num_nodes={num_nodes}"):
        NeighbourGraph.from_edges([], num_nodes=num_nodes)


@pytest.mark.parametrize("edges", [np.array([[0.0, 1.0]]), np.array([0, 1, 2]), np.array([[0, 1, 2]])])
def test_malformed_edges_raise(edges: np.ndarray) -> None:
    with pytest.raises(EmbregError, match="edges"):
        NeighbourGraph.from_edges(edges, num_nodes=4)


@pytest.mark.parametrize("edges", [[], np.zeros((0, 2), dtype=np.int64), torch.zeros(0, 2, dtype=torch.long)])
def test_empty_graph_is_allowed(edges: object) -> None:
    graph = NeighbourGraph.from_edges(edges, num_nodes=4)
    assert graph.num_edges == 0
    assert graph.degree.tolist() == [0, 0, 0, 0]
    assert graph.indptr.tolist() == [0, 0, 0, 0, 0]


def test_from_scipy_matches_from_edges_and_ignores_explicit_zeros() -> None:
    rows, cols, data = [0, 1, 3, 2], [1, 2, 0, 3], [1.0, 2.0, 5.0, 0.0]  # (2, 3) is an explicit zero
    matrix = sp.csr_matrix((data, (rows, cols)), shape=(4, 4))
    from_scipy = NeighbourGraph.from_scipy(matrix)
    from_edges = NeighbourGraph.from_edges([[0, 1], [1, 2], [3, 0]], num_nodes=4)
    assert torch.equal(from_scipy.indptr, from_edges.indptr)
    assert torch.equal(from_scipy.indices, from_edges.indices)


def test_from_scipy_rejects_non_square_matrices() -> None:
    with pytest.raises(EmbregError, match=r"square.*\(3, 4\)"):
        NeighbourGraph.from_scipy(sp.csr_matrix((3, 4)))


def test_nth_non_neighbour_matches_brute_force() -> None:
    generator = torch.Generator().manual_seed(0)
    n = 12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = NeighbourGraph.from_edges(torch.randint(0, n, (30, 2), generator=generator), num_nodes=n)
    nodes, ranks, expected = [], [], []
    for j in range(n):
        excluded = set(graph.neighbours(j).tolist()) | {j}
        free = [k for k in range(n) if k not in excluded]
        for r, k in enumerate(free):
            nodes.append(j)
            ranks.append(r)
            expected.append(k)
    got = graph.nth_non_neighbour(torch.tensor(nodes), torch.tensor(ranks))
    assert got.tolist() == expected


def test_free_keys_are_sorted_for_any_graph() -> None:
    generator = torch.Generator().manual_seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = NeighbourGraph.from_edges(torch.randint(0, 40, (300, 2), generator=generator), num_nodes=40)
    keys = graph.free_keys
    assert keys.numel() == graph.indices.numel() + 40
    assert bool((keys[1:] >= keys[:-1]).all())


def test_to_same_device_returns_self_and_repr_names_sizes() -> None:
    graph = NeighbourGraph.from_edges([[0, 1]], num_nodes=3)
    assert graph.to("cpu") is graph
    assert "num_nodes=3" in repr(graph) and "num_edges=1" in repr(graph)


def test_neighbours_out_of_range_raise() -> None:
    graph = NeighbourGraph.from_edges(list(itertools.combinations(range(4), 2)), num_nodes=4)
    assert graph.degree.tolist() == [3, 3, 3, 3]
    with pytest.raises(EmbregError, match=r"node=4.*\[0, 4\)"):
        graph.neighbours(4)


def test_uniform_non_neighbour_is_uniform_over_the_free_ids(hub_and_isolated_graph: NeighbourGraph) -> None:
    graph = hub_and_isolated_graph
    nodes = torch.tensor([1, 8]).repeat(40_000)
    drawn = graph.uniform_non_neighbour(nodes.view(2, -1), torch.Generator().manual_seed(0)).view(-1)
    for node in (1, 8):
        picked = drawn[nodes == node]
        free = sorted(set(range(9)) - set(graph.neighbours(node).tolist()) - {node})
        counts = torch.bincount(picked, minlength=9)
        assert int(counts.sum()) == int(counts[free].sum())  # never itself, never a neighbour
        assert stats.chisquare(counts[free].numpy()).pvalue > 1e-4


def test_uniform_non_neighbour_rejects_full_rows_and_bad_nodes(full_hub_graph: NeighbourGraph) -> None:
    with pytest.raises(EmbregError, match="node 0 is adjacent to every other node"):
        full_hub_graph.uniform_non_neighbour(torch.tensor([1, 0]))
    with pytest.raises(EmbregError, match=r"valid range is \[0, 6\)"):
        full_hub_graph.uniform_non_neighbour(torch.tensor([6]))


def test_free_keys_are_built_lazily_and_cached() -> None:
    graph = NeighbourGraph.from_edges([[0, 1]], num_nodes=4)
    assert graph._free_keys is None
    keys = graph.free_keys
    assert graph.free_keys is keys  # cached
    assert graph.nth_non_neighbour(torch.tensor([0, 0]), torch.tensor([0, 1])).tolist() == [2, 3]

"""Helpers shared by the SSE tests (a uniquely named module so it cannot clash with other test folders)."""

from __future__ import annotations

import torch

# 9 nodes: node 0 is adjacent to every node but the isolated node 8; the rest form a path and a triangle.
HUB_AND_ISOLATED_EDGES = [[0, k] for k in range(1, 8)] + [[1, 2], [2, 3], [4, 5], [5, 6], [4, 6]]
# 6 nodes: node 0 is adjacent to every other node, so it has no non-neighbour at all.
FULL_HUB_EDGES = [[0, k] for k in range(1, 6)] + [[1, 2], [3, 4]]


def empirical_transitions(source: torch.Tensor, target: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Row-normalised (N, N) float64 frequencies of source -> target pairs."""
    counts = torch.bincount(source.reshape(-1) * num_nodes + target.reshape(-1), minlength=num_nodes * num_nodes)
    counts = counts.view(num_nodes, num_nodes).to(torch.float64)
    return counts / counts.sum(1, keepdim=True)


def row_total_variation(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(N,) total variation distance between matching rows of two (N, N) stochastic matrices."""
    return 0.5 * (a - b).abs().sum(1)


def se_matrix(num_embeddings: int, p: float) -> torch.Tensor:
    """SSE-SE's analytic law (eq. 5): 1 - p on the diagonal, p / (N - 1) elsewhere."""
    off = torch.full((num_embeddings, num_embeddings), p / (num_embeddings - 1), dtype=torch.float64)
    off.fill_diagonal_(1.0 - p)
    return off

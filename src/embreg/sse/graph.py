"""An undirected neighbour graph over embedding ids, stored in CSR form for SSE-Graph.

SSE-Graph (sse-stochastic-shared-embeddings.txt, Section 3.1, eq. 3) swaps an id
preferentially with its neighbours in a knowledge graph. :class:`NeighbourGraph`
holds that graph in the form the vectorised sampler needs: CSR rows sorted per
node and node degrees. It can also draw uniform *non*-neighbours exactly (e.g.
negatives that exclude a user's positives) through a sorted key array that lets
one ``torch.searchsorted`` find "the r-th id that is neither j nor a neighbour of
j" for every j at once; that array is built on first use.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from embreg.errors import EmbregError
from embreg.sse._validation import check_num_embeddings


class NeighbourGraph:
    """Undirected graph over ``num_nodes`` ids in CSR form (rows sorted, no self-loops).

    Build it with :meth:`from_edges` or :meth:`from_scipy`; both make the edges
    symmetric, merge duplicates and drop self-loops (warning once per kind with
    the count). An edge list given in both directions, ``(u, v)`` and ``(v, u)``,
    is the normal symmetric form and is not reported as a duplicate; only a
    repeated ordered pair is. A graph without edges is allowed: SSE-Graph on it
    is SSE-SE.

    Attributes:
        indptr: (N + 1,) int64, row ``j``'s neighbours are ``indices[indptr[j]:indptr[j + 1]]``.
        indices: (2 * num_edges,) int64 neighbour ids, ascending within each row.

    Example:
        >>> g = NeighbourGraph.from_edges([[0, 1], [1, 2]], num_nodes=4)
        >>> g.degree.tolist(), g.num_edges
        ([1, 2, 1, 0], 2)
        >>> g.neighbours(1).tolist()
        [0, 2]
    """

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, num_nodes: int) -> None:
        """Wrap an already symmetric CSR structure without self-loops.

        Most users want :meth:`from_edges` or :meth:`from_scipy`, which build and
        check the CSR arrays. This constructor checks only shapes and dtypes.

        Args:
            indptr: (N + 1,) int64 row pointers.
            indices: (nnz,) int64 column ids, sorted within each row, symmetric, no self-loops.
            num_nodes: N, at least 2.
        """
        self._num_nodes = check_num_embeddings(num_nodes, "num_nodes")
        if indptr.dtype != torch.int64 or indices.dtype != torch.int64:
            raise EmbregError(f"indptr and indices must be int64, got {indptr.dtype} and {indices.dtype}")
        if indptr.shape != (num_nodes + 1,):
            raise EmbregError(f"indptr has shape {tuple(indptr.shape)}; expected ({num_nodes + 1},)")
        if indices.dim() != 1 or indices.numel() != int(indptr[-1]):
            raise EmbregError(f"indices has {indices.numel()} entries but indptr[-1] is {int(indptr[-1])}")
        self.indptr = indptr
        self.indices = indices
        self._degree = indptr[1:] - indptr[:-1]
        self._free_keys: torch.Tensor | None = None

    @classmethod
    def _from_parts(
        cls, indptr: torch.Tensor, indices: torch.Tensor, degree: torch.Tensor, num_nodes: int
    ) -> NeighbourGraph:
        """Reassemble a graph from tensors an existing graph computed (no checks, no work)."""
        graph = object.__new__(cls)
        graph._num_nodes = num_nodes
        graph.indptr, graph.indices, graph._degree = indptr, indices, degree
        graph._free_keys = None
        return graph

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_edges(cls, edges: Any, num_nodes: int) -> NeighbourGraph:
        """Build a graph from an edge list.

        Args:
            edges: array-like (E, 2) of integer node ids (numpy array, torch tensor or
                nested list); ``E`` may be 0.
            num_nodes: N, the number of ids (>= 2); every edge id must be in [0, N).

        Returns:
            The symmetric, deduplicated graph without self-loops.

        Example:
            >>> NeighbourGraph.from_edges(np.array([[0, 1], [1, 0], [1, 2]]), 3).num_edges  # (0, 1) listed both ways
            2
        """
        num_nodes = check_num_embeddings(num_nodes, "num_nodes")
        pairs = _as_edge_tensor(edges)
        if pairs.numel() > 0:
            lo, hi = int(pairs.min()), int(pairs.max())
            if lo < 0 or hi >= num_nodes:
                bad = pairs[(pairs < 0) | (pairs >= num_nodes)]
                raise EmbregError(
                    f"edge node id {int(bad[0])} is out of range; valid range is [0, {num_nodes}) "
                    f"({bad.numel()} bad value(s), from {int(bad.min())} to {int(bad.max())})"
                )
        is_loop = pairs[:, 0] == pairs[:, 1]
        num_loops = int(is_loop.sum())
        if num_loops:
            warnings.warn(f"NeighbourGraph: dropped {num_loops} self-loop(s)", stacklevel=2)
            pairs = pairs[~is_loop]
        ordered_keys = pairs[:, 0] * num_nodes + pairs[:, 1]
        num_duplicates = ordered_keys.numel() - torch.unique(ordered_keys).numel()
        if num_duplicates:
            warnings.warn(f"NeighbourGraph: merged {num_duplicates} duplicate edge(s)", stacklevel=2)
        both_directions = torch.cat([ordered_keys, pairs[:, 1] * num_nodes + pairs[:, 0]])
        keys = torch.unique(both_directions)  # sorted, so rows and then columns come out ascending
        rows = torch.div(keys, num_nodes, rounding_mode="floor")
        cols = keys - rows * num_nodes
        counts = torch.bincount(rows, minlength=num_nodes)
        indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
        torch.cumsum(counts, 0, out=indptr[1:])
        return cls(indptr, cols.contiguous(), num_nodes)

    @classmethod
    def from_scipy(cls, matrix: Any) -> NeighbourGraph:
        """Build a graph from a square scipy sparse matrix whose nonzeros are edges.

        Explicitly stored zeros are not edges. The matrix need not be symmetric:
        an entry at (u, v) makes u and v neighbours of each other.

        Args:
            matrix: scipy sparse matrix or array of shape (N, N).

        Example:
            >>> import scipy.sparse as sp
            >>> NeighbourGraph.from_scipy(sp.coo_matrix(([1, 1], ([0, 1], [1, 2])), shape=(3, 3))).num_edges
            2
        """
        if not hasattr(matrix, "tocoo") or not hasattr(matrix, "shape"):
            raise EmbregError(f"expected a scipy sparse matrix, got {type(matrix).__name__}")
        rows_count, cols_count = matrix.shape
        if rows_count != cols_count:
            raise EmbregError(f"adjacency matrix must be square, got shape {matrix.shape}")
        coo = matrix.tocoo()
        nonzero = np.asarray(coo.data) != 0
        edges = np.stack([np.asarray(coo.row)[nonzero], np.asarray(coo.col)[nonzero]], axis=1)
        return cls.from_edges(edges.astype(np.int64), int(rows_count))

    # ---------------------------------------------------------------- properties
    @property
    def num_nodes(self) -> int:
        """N, the number of ids."""
        return self._num_nodes

    @property
    def num_edges(self) -> int:
        """Number of undirected edges (each counted once)."""
        return self.indices.numel() // 2

    @property
    def degree(self) -> torch.Tensor:
        """(N,) int64 number of neighbours of each id (self excluded)."""
        return self._degree

    @property
    def device(self) -> torch.device:
        """Device the CSR tensors live on."""
        return self.indptr.device

    def neighbours(self, node: int) -> torch.Tensor:
        """Sorted neighbour ids of ``node``, shape (degree[node],)."""
        if not 0 <= node < self._num_nodes:
            raise EmbregError(f"node={node} is out of range; valid range is [0, {self._num_nodes})")
        return self.indices[int(self.indptr[node]) : int(self.indptr[node + 1])]

    @property
    def free_keys(self) -> torch.Tensor:
        """(2 * num_edges + N,) int64 sorted search keys of :meth:`nth_non_neighbour`, built on first use."""
        if self._free_keys is None:
            self._free_keys = _free_value_keys(self.indptr, self.indices, self._num_nodes)
        return self._free_keys

    def nth_non_neighbour(self, nodes: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
        """The ``ranks``-th (0-based, ascending) id that is neither the node nor one of its neighbours.

        Vectorised over any number of queries with one ``searchsorted`` on
        :attr:`free_keys`; no checks, so ranks must lie in [0, N - 1 - degree[nodes]).

        Args:
            nodes: (K,) int64 node ids on the graph's device.
            ranks: (K,) int64 ranks.

        Returns:
            (K,) int64 ids.

        Example:
            >>> g = NeighbourGraph.from_edges([[0, 1], [0, 3]], num_nodes=5)
            >>> g.nth_non_neighbour(torch.tensor([0, 0, 4]), torch.tensor([0, 1, 3])).tolist()
            [2, 4, 3]
        """
        queries = nodes * (self._num_nodes + 1) + ranks
        excluded_before = torch.searchsorted(self.free_keys, queries, right=True) - (self.indptr[nodes] + nodes)
        return ranks + excluded_before

    def uniform_non_neighbour(self, nodes: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """For each node, an id drawn uniformly among those that are neither it nor its neighbours.

        Exact and loop-free (no rejection): a uniform rank is mapped by
        :meth:`nth_non_neighbour`. Useful for negative sampling that must avoid a
        node's known positives.

        Args:
            nodes: integer tensor of any shape on the graph's device; each node needs at
                least one non-neighbour (degree < N - 1).
            generator: source of randomness on the graph's device; None uses the global RNG.

        Returns:
            int64 tensor of the shape of ``nodes``.

        Example:
            >>> g = NeighbourGraph.from_edges([[0, 1], [0, 2]], num_nodes=4)
            >>> g.uniform_non_neighbour(torch.tensor([0, 0, 0])).tolist()
            [3, 3, 3]
        """
        flat = nodes.reshape(-1).long()
        if flat.numel() == 0:
            return flat.view(nodes.shape)
        if int(flat.min()) < 0 or int(flat.max()) >= self._num_nodes:
            raise EmbregError(
                f"nodes from {int(flat.min())} to {int(flat.max())}; valid range is [0, {self._num_nodes})"
            )
        free_count = (self._num_nodes - 1) - self._degree[flat]
        if int(free_count.min()) < 1:
            full = flat[free_count < 1][0]
            raise EmbregError(f"node {int(full)} is adjacent to every other node: it has no non-neighbour")
        uniform = torch.rand(flat.shape, dtype=torch.float64, generator=generator, device=flat.device)
        ranks = torch.minimum(torch.floor(uniform * free_count).long(), free_count - 1)
        return self.nth_non_neighbour(flat, ranks).view(nodes.shape)

    def adjacency(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """Dense (N, N) adjacency matrix; meant for small graphs and tests."""
        dense = torch.zeros(self._num_nodes, self._num_nodes, dtype=dtype, device=self.device)
        rows = torch.repeat_interleave(torch.arange(self._num_nodes, device=self.device), self._degree)
        dense[rows, self.indices] = 1
        return dense

    def to(self, device: torch.device | str) -> NeighbourGraph:
        """Return a copy whose tensors live on ``device`` (self if already there)."""
        device = torch.device(device)
        if self.indptr.device == device:
            return self
        moved = NeighbourGraph._from_parts(
            self.indptr.to(device), self.indices.to(device), self._degree.to(device), self._num_nodes
        )
        if self._free_keys is not None:
            moved._free_keys = self._free_keys.to(device)
        return moved

    def __repr__(self) -> str:
        return f"NeighbourGraph(num_nodes={self._num_nodes}, num_edges={self.num_edges}, device={self.device})"


def _as_edge_tensor(edges: Any) -> torch.Tensor:
    """Convert an edge list to a CPU int64 tensor of shape (E, 2)."""
    if isinstance(edges, torch.Tensor):
        tensor = edges.detach().cpu()
    else:
        array = np.asarray(edges)
        if array.dtype == object:
            raise EmbregError("edges must be a rectangular (E, 2) array of integers")
        tensor = torch.from_numpy(np.ascontiguousarray(array))
    if tensor.numel() == 0:
        return torch.zeros(0, 2, dtype=torch.int64)
    if tensor.dtype == torch.bool or tensor.is_floating_point() or tensor.is_complex():
        raise EmbregError(f"edges must hold integer node ids, got dtype {tensor.dtype}")
    if tensor.dim() != 2 or tensor.shape[1] != 2:
        raise EmbregError(f"edges must have shape (E, 2), got {tuple(tensor.shape)}")
    return tensor.to(torch.int64)


def _free_value_keys(indptr: torch.Tensor, indices: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Sorted keys that map (row j, rank r) to the r-th id outside {j} ∪ nbrs(j).

    For row j let e_0 < e_1 < ... be the sorted excluded set {j} ∪ nbrs(j). The
    r-th free id (0-based) is ``r + #{i : e_i - i <= r}``, and ``e_i - i`` is
    non-decreasing in i. Storing ``j * (N + 1) + (e_i - i)`` for every row gives a
    single ascending array (each row's values lie in [0, N]), so one global
    ``searchsorted`` answers all rows; subtracting the row's start ``indptr[j] + j``
    turns the global count into the per-row count.
    """
    rows = torch.repeat_interleave(torch.arange(num_nodes, device=indptr.device), indptr[1:] - indptr[:-1])
    own = torch.arange(num_nodes, device=indptr.device)
    # self-loops were removed, so a node never appears in its own row and the merge has no ties
    excluded_rows = torch.cat([rows, own])
    excluded_cols = torch.cat([indices, own])
    order = torch.argsort(excluded_rows * num_nodes + excluded_cols)
    excluded_rows = excluded_rows[order]
    excluded_cols = excluded_cols[order]
    row_start = indptr[:-1] + own
    rank_in_row = torch.arange(excluded_cols.numel(), device=indptr.device) - row_start[excluded_rows]
    return excluded_rows * (num_nodes + 1) + (excluded_cols - rank_in_row)

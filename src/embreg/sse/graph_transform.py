"""SSE-Graph as a module: swaps that favour neighbours in a knowledge graph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from embreg.errors import ConfigError, EmbregError
from embreg.registry import register
from embreg.sse._validation import check_probability, check_rho
from embreg.sse.base import IndexTransform, recipe_seed, same_device
from embreg.sse.functional import _sample_graph
from embreg.sse.functional import transition_matrix as _transition_matrix
from embreg.sse.graph import NeighbourGraph


class SSEGraph(IndexTransform):
    """Stochastic Shared Embeddings with a knowledge graph (SSE-Graph).

    In training mode each id j is kept with probability 1 - p; otherwise it is
    replaced by another id, a graph neighbour of j being ``rho`` times as likely as
    a non-neighbour (sse-stochastic-shared-embeddings.txt, Section 3.1, eq. 3,
    exactly normalised; see :func:`embreg.sse.functional.sse_graph`). Ids with no
    neighbours, and every id when ``rho == 1``, are swapped as in SSE-SE (eq. 5).

    The graph's tensors are non-persistent buffers: ``module.to(device)`` moves
    them, and they are not written into ``state_dict()`` (the graph is data, not
    learned state; the generator state is saved).

    Args:
        graph: neighbour graph over the N ids of the embedding table.
        p: swap probability p0 in [0, 1].
        rho: neighbour preference, >= 1.
        seed: generator seed; None draws one from torch's global RNG.
        rank_offset: added to the seed (e.g. the DDP rank).

    Shapes:
        ids: any shape, e.g. (B,) or (B, L); the output has the same shape and dtype.

    Example:
        >>> graph = NeighbourGraph.from_edges([[0, 1], [1, 2], [3, 4]], num_nodes=6)
        >>> sse = SSEGraph(graph, p=0.1, rho=20.0, seed=0)
        >>> sse(torch.tensor([[0, 1, 2], [3, 4, 5]])).shape
        torch.Size([2, 3])
        >>> sse.transition_matrix().shape
        torch.Size([6, 6])
    """

    # buffers registered in __init__, declared here for type checkers
    graph_indptr: torch.Tensor
    graph_indices: torch.Tensor
    graph_degree: torch.Tensor

    def __init__(
        self, graph: NeighbourGraph, p: float, rho: float, seed: int | None = None, rank_offset: int = 0
    ) -> None:
        if not isinstance(graph, NeighbourGraph):
            raise EmbregError(f"graph must be a NeighbourGraph, got {type(graph).__name__}")
        super().__init__(graph.num_nodes, p, seed=seed, rank_offset=rank_offset)
        self.rho = rho
        self.register_buffer("graph_indptr", graph.indptr, persistent=False)
        self.register_buffer("graph_indices", graph.indices, persistent=False)
        self.register_buffer("graph_degree", graph.degree, persistent=False)
        self._graph_copy: tuple[torch.Tensor, NeighbourGraph] | None = None  # (the indptr buffer it copies, copy)

    @property
    def rho(self) -> float:
        """Neighbour preference (>= 1): a neighbour is rho times as likely as a non-neighbour."""
        return self._rho

    @rho.setter
    def rho(self, value: float) -> None:
        self._rho = check_rho(value)

    @property
    def graph(self) -> NeighbourGraph:
        """The neighbour graph, on the module's current device."""
        return NeighbourGraph._from_parts(self.graph_indptr, self.graph_indices, self.graph_degree, self.num_embeddings)

    def graph_on(self, device: torch.device) -> NeighbourGraph:
        """The graph on ``device``: the buffers themselves there, else a copy made once and kept until the buffers
        change (ids drawn on the host of a model on a GPU, :mod:`embreg.train.host_draws`)."""
        if same_device(self.graph_indptr.device, device):
            return self.graph
        if (
            self._graph_copy is None
            or self._graph_copy[0] is not self.graph_indptr
            or not same_device(self._graph_copy[1].indptr.device, device)
        ):
            self._graph_copy = (self.graph_indptr, self.graph.to(device))
        return self._graph_copy[1]

    def _fused_sample(self, ids: torch.Tensor) -> torch.Tensor | None:
        graph = self.graph_on(ids.device)
        return self._run_kernel(
            ids, lambda kernel, gen: kernel.sse_graph(ids, graph.indptr, graph.indices, self._p, self._rho, gen)
        )

    def sample(self, ids: torch.Tensor) -> torch.Tensor:
        """Swap each id with probability p, favouring graph neighbours (eq. 3)."""
        return _sample_graph(ids, self.graph_on(ids.device), self._p, self._rho, self.generator(ids.device))

    def transition_matrix(self) -> torch.Tensor:
        """Dense (N, N) float64 law of the swaps, ``T[j, k] = p(j, k)`` (eq. 3); for small N."""
        return _transition_matrix(self.graph, self.p, self._rho)

    def extra_repr(self) -> str:
        return (
            f"num_nodes={self.num_embeddings}, num_edges={self.graph_indices.numel() // 2}, "
            f"p={self.p}, rho={self._rho}, seed={self.seed}, rank_offset={self.rank_offset}"
        )


DEFAULT_GRAPHS = {"item": "kg", "user": "occupation"}
"""The graph an ``sse-graph`` transform uses per id kind when its config names none."""


@dataclass
class SSEGraphConfig:
    """``index_transforms: {item: {name: sse-graph, p: 0.04, rho: 5.7, graph: kg}}``.

    Attributes:
        p: probability of leaving the id (``1 - p0`` of eq. 3).
        rho: how much likelier a neighbour is than a non-neighbour as the replacement (>= 1).
        graph: the task's named graph over these ids: items ``kg`` (shared actor, director, writer, producer)
            or ``genre``; users an attribute such as ``occupation`` (``null``: ``kg`` for items, ``occupation`` for
            users).
        relations: knowledge-graph relations that make two items neighbours (``null``: the default set).
        seed_offset: added to the training seed (and a per-kind offset) to seed the transform's generator.
    """

    p: float = 0.01
    rho: float = 1.0
    graph: str | None = None
    relations: list[str] | None = None
    seed_offset: int = 1000

    def __post_init__(self) -> None:
        check_probability(self.p)
        if self.rho < 1:
            raise ConfigError(f"rho={self.rho} must be >= 1")


@register(
    "index_transform",
    "sse-graph",
    config=SSEGraphConfig,
    kinds=("user", "item"),
    summary="SSE-Graph: swaps favour the id's neighbours in a knowledge graph by a factor rho",
    reference="sse-stochastic-shared-embeddings.txt, eq. 3",
)
def build_sse_graph(config: SSEGraphConfig, context: Any) -> SSEGraph:
    """:class:`SSEGraph` over the task's graph ``config.graph`` on ``context.kind`` ids."""
    name = config.graph if config.graph is not None else DEFAULT_GRAPHS.get(context.kind, "kg")
    graph = context.graph(name, config.relations)
    return SSEGraph(graph, config.p, config.rho, seed=recipe_seed(context, config.seed_offset))

"""Pure, vectorised index transforms of Stochastic Shared Embeddings (SSE).

Paper: sse-stochastic-shared-embeddings.txt. Each id j in a tensor is kept with
probability 1 - p and otherwise replaced by an id k drawn from a transition law:

* :func:`sse_se` — SSE-SE, eq. 5: k uniform among the other N - 1 ids;
* :func:`sse_graph` — SSE-Graph, eq. 3: a neighbour of j in a knowledge graph is
  ``rho`` times as likely as a non-neighbour, exactly normalised;
* :func:`transition_matrix` — the dense analytic (N, N) law of :func:`sse_graph`.

All samplers run on the ids' device without a Python loop over ids, keep the
input's shape and dtype, and draw randomness only from the given generator.
For p <= 0.5 the swapped positions are drawn from the geometric gaps of the
Bernoulli process, so at the usual p = 0.01 about one random number is drawn
per hundred ids; everything after that works on the swapped ids only.

Backends: CPU ids go through the fused C++ kernel of :mod:`embreg.sse._kernel`
(one pass, no per-op overhead) when it is available; SSE-SE on CUDA ids goes
through the one-launch Triton kernel of :mod:`embreg.sse._cuda_sampler` when
Triton imports; everything else takes the tensor-op samplers below.
``EMBREG_SSE_KERNEL=off`` forces the tensor ops. The laws are the same; the
random streams differ.
"""

from __future__ import annotations

import math

import torch

from embreg.errors import EmbregError
from embreg.sse._cuda_sampler import cuda_sampler, sse_se_cuda
from embreg.sse._kernel import fused_kernel, with_range_error
from embreg.sse._validation import (
    check_ids_dtype,
    check_ids_range,
    check_num_embeddings,
    check_probability,
    check_rho,
)
from embreg.sse.graph import NeighbourGraph

__all__ = ["sse_se", "sse_graph", "transition_matrix"]

# Above this p one uniform per id is cheaper than geometric gaps (measured on a 2-thread CPU).
_GEOMETRIC_GAPS_MAX_P = 0.5
# Gaps drawn per batch: the expected number plus this many standard deviations, so one batch nearly always suffices.
_GAP_BATCH_SLACK_SD = 6.0
# Up to this many ids, one fused pass over all ids (a handful of tensor ops) beats the geometric-gap path, whose
# fixed cost of small ops dominates a training step's mini-batch (measured: 1024 ids, ~3x less time per call).
_DENSE_PATH_MAX_IDS = 1 << 15
# The CUDA kernel numbers positions in 32 bits (its Philox counter word).
_CUDA_KERNEL_MAX_IDS = 1 << 31


def sse_se(ids: torch.Tensor, num_embeddings: int, p: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """SSE-SE: keep each id with probability 1 - p, else swap it for a uniform *other* id.

    Implements sse-stochastic-shared-embeddings.txt, eq. 5:
    ``p(j, k) = p / (N - 1)`` for every ``k != j`` and ``p(j, j) = 1 - p``.

    Args:
        ids: integer tensor of any shape, e.g. (B,), (B, L) or (B, L, F), values in [0, N); any dtype of
            ``ID_DTYPES`` whose range holds N - 1 (``int16`` ids and N = 40000 are refused, naming the dtype).
        num_embeddings: N, the size of the embedding table (>= 2).
        p: swap probability p0 in [0, 1].
        generator: source of randomness on the ids' device; None uses torch's global RNG.

    Returns:
        A tensor with the shape, dtype and device of ``ids``; ``ids`` itself when p == 0.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> out = sse_se(torch.arange(6).view(2, 3), num_embeddings=6, p=0.5, generator=g)
        >>> out.shape, out.dtype
        (torch.Size([2, 3]), torch.int64)
    """
    num_embeddings = check_num_embeddings(num_embeddings)
    check_ids_dtype(ids, num_embeddings)
    p = check_probability(p)
    _check_generator(generator, ids)
    kernel = _cpu_kernel(ids, generator) if p > 0.0 and ids.numel() > 0 else None
    if kernel is not None:  # the kernel range-checks every id itself; the Python check only words its error
        return with_range_error(ids, num_embeddings, lambda: kernel.sse_se(ids, num_embeddings, p, generator))
    check_ids_range(ids, num_embeddings)
    if p == 0.0 or ids.numel() == 0:
        return ids
    return _sample_se(ids, num_embeddings, p, generator)


def sse_graph(
    ids: torch.Tensor,
    graph: NeighbourGraph,
    p: float,
    rho: float,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """SSE-Graph: keep each id with probability 1 - p, else swap it, favouring graph neighbours.

    Implements sse-stochastic-shared-embeddings.txt, eq. 3, exactly normalised.
    With ``deg_j`` neighbours of j (self excluded) and
    ``c_j = p / (rho * deg_j + (N - 1 - deg_j))``::

        p(j, j) = 1 - p,   p(j, k) = rho * c_j  if k ~ j,   p(j, k) = c_j  otherwise.

    Sampling, exact and without search or rejection: conditioned on a swap, the
    law of eq. 3 is the mixture::

        a_j * Uniform(nbrs(j)) + (1 - a_j) * Uniform(all ids but j),
        a_j = (rho - 1) * deg_j / (rho * deg_j + N - 1 - deg_j),

    because a non-neighbour then gets ``(1 - a_j) / (N - 1) = c_j / p`` and a
    neighbour ``a_j / deg_j + (1 - a_j) / (N - 1) = rho * c_j / p``; ``a_j`` lies in
    [0, 1) as rho >= 1. A uniform neighbour is read from the CSR rows
    (``indptr[j] + floor(u * deg_j)``), a uniform other id as in SSE-SE. An id
    without neighbours (a_j = 0) is therefore swapped as in SSE-SE (eq. 5), and
    ``rho == 1`` gives SSE-SE's law for every id.

    Args:
        ids: integer tensor of any shape, values in [0, graph.num_nodes), of a dtype that holds ``num_nodes - 1``.
        graph: neighbour graph on the same device as ``ids`` (see ``graph.to``).
        p: swap probability p0 in [0, 1].
        rho: neighbour preference, >= 1.
        generator: source of randomness on the ids' device; None uses torch's global RNG.

    Returns:
        A tensor with the shape, dtype and device of ``ids``; ``ids`` itself when p == 0.

    Example:
        >>> graph = NeighbourGraph.from_edges([[0, 1], [1, 2], [2, 3]], num_nodes=5)
        >>> g = torch.Generator().manual_seed(0)
        >>> sse_graph(torch.tensor([[0, 1], [2, 4]]), graph, p=0.2, rho=10.0, generator=g).shape
        torch.Size([2, 2])
    """
    if not isinstance(graph, NeighbourGraph):
        raise EmbregError(f"graph must be a NeighbourGraph, got {type(graph).__name__}")
    check_ids_dtype(ids, graph.num_nodes)
    p = check_probability(p)
    rho = check_rho(rho)
    if graph.device != ids.device:
        raise EmbregError(f"graph is on {graph.device} but ids are on {ids.device}; call graph.to(ids.device)")
    _check_generator(generator, ids)
    kernel = _cpu_kernel(ids, generator) if p > 0.0 and ids.numel() > 0 else None
    if kernel is not None:
        return with_range_error(
            ids, graph.num_nodes, lambda: kernel.sse_graph(ids, graph.indptr, graph.indices, p, rho, generator)
        )
    check_ids_range(ids, graph.num_nodes)
    if p == 0.0 or ids.numel() == 0:
        return ids
    return _sample_graph(ids, graph, p, rho, generator)


def transition_matrix(graph: NeighbourGraph, p: float, rho: float) -> torch.Tensor:
    """Dense SSE-Graph transition law T with ``T[j, k] = p(j, k)`` (eq. 3), rows summing to 1.

    Meant for tests and small graphs: it allocates N * N float64 values.

    Args:
        graph: neighbour graph over N ids.
        p: swap probability p0 in [0, 1].
        rho: neighbour preference, >= 1.

    Returns:
        (N, N) float64 tensor on the graph's device.

    Example:
        >>> T = transition_matrix(NeighbourGraph.from_edges([[0, 1]], 3), p=0.3, rho=2.0)
        >>> bool(torch.allclose(T.sum(1), torch.ones(3, dtype=torch.float64)))
        True
    """
    if not isinstance(graph, NeighbourGraph):
        raise EmbregError(f"graph must be a NeighbourGraph, got {type(graph).__name__}")
    p = check_probability(p)
    rho = check_rho(rho)
    n = graph.num_nodes
    adjacency = graph.adjacency(torch.float64)
    degree = graph.degree.to(torch.float64)
    per_other = p / (rho * degree + (n - 1 - degree))
    matrix = per_other[:, None] * (1.0 + (rho - 1.0) * adjacency)
    matrix.diagonal().fill_(1.0 - p)
    return matrix


# --------------------------------------------------------------------------- cores
# The cores assume checked input; the modules call them after their own checks.


def _swap_positions(flat_ids: torch.Tensor, p: float, generator: torch.Generator | None) -> torch.Tensor:
    """Ascending flat positions chosen for a swap, each independently with probability p; shape (K,).

    For small p, drawing one uniform per id costs more than everything else, so
    the swap positions are drawn as a Bernoulli process from its geometric gaps:
    about p * n draws instead of n (the law is the same).
    """
    n = flat_ids.numel()
    device = flat_ids.device
    if p >= 1.0:
        return torch.arange(n, device=device)
    if p > _GEOMETRIC_GAPS_MAX_P:
        uniform = torch.rand(n, generator=generator, device=device)
        return torch.nonzero(uniform < p).squeeze(1)
    log_keep = math.log1p(-p)
    chunks = []
    start = 0  # first position not yet decided
    while start < n:
        expected = (n - start) * p
        # enough gaps to reach the end almost always; the loop tops up otherwise
        count = max(int(expected + _GAP_BATCH_SLACK_SD * math.sqrt(expected)) + 16, 1)
        # failures before the next success, Geometric(p) on {0, 1, ...} by inversion (U and 1 - U share a law);
        # own in-place chain rather than Tensor.geometric_, which is single-threaded and slower on CPU
        uniform = torch.rand(count, dtype=torch.float64, generator=generator, device=device)
        failures = uniform.log_().div_(log_keep).floor_().clamp_(max=n).long()
        positions = torch.cumsum(failures.add_(1), 0).add_(start - 1)
        last = int(positions[-1])
        if last >= n:
            chunks.append(positions[: int(torch.searchsorted(positions, n))])
            break
        chunks.append(positions)
        start = last + 1
    return chunks[0] if len(chunks) == 1 else torch.cat(chunks)


def _fresh_flat_copy(ids: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of ``ids`` viewed as 1-D (one copy even for non-contiguous input)."""
    return ids.clone(memory_format=torch.contiguous_format).view(-1)


def _cpu_kernel(ids: torch.Tensor, generator: torch.Generator | None):
    """The fused kernel when ``ids`` (and the generator) are on the CPU and it is available, else None."""
    if ids.device.type != "cpu" or (generator is not None and generator.device.type != "cpu"):
        return None
    return fused_kernel()


def _cuda_kernel(ids: torch.Tensor):
    """The Triton sampler for non-empty CUDA ids when it is the backend, else None (it counts ids in 32 bits)."""
    return cuda_sampler(ids) if 0 < ids.numel() < _CUDA_KERNEL_MAX_IDS else None


def _sample_se(ids: torch.Tensor, num_embeddings: int, p: float, generator: torch.Generator | None) -> torch.Tensor:
    """Unchecked core of :func:`sse_se`."""
    kernel = _cpu_kernel(ids, generator)
    if kernel is not None:
        return kernel.sse_se(ids, num_embeddings, p, generator)
    cuda = _cuda_kernel(ids)
    if cuda is not None:
        return sse_se_cuda(cuda, ids, num_embeddings, p, generator)
    if ids.numel() <= _DENSE_PATH_MAX_IDS:
        return _sample_se_dense(ids, num_embeddings, p, generator)
    out = _fresh_flat_copy(ids)
    positions = _swap_positions(out, p, generator)
    current = out[positions].long()
    rank = torch.randint(0, num_embeddings - 1, current.shape, generator=generator, device=out.device)
    # skipping over the current id turns a uniform draw on N - 1 values into "uniform among the others"
    rank.add_(rank >= current)
    out[positions] = rank.to(out.dtype)
    return out.view(ids.shape)


def _sample_se_dense(
    ids: torch.Tensor, num_embeddings: int, p: float, generator: torch.Generator | None
) -> torch.Tensor:
    """SSE-SE for mini-batches: a swap decision and a candidate for every id, merged with ``torch.where``."""
    swap = torch.rand(ids.shape, generator=generator, device=ids.device) < p
    rank = torch.randint(0, num_embeddings - 1, ids.shape, generator=generator, device=ids.device, dtype=ids.dtype)
    rank += rank >= ids
    return torch.where(swap, rank, ids)


def _sample_graph_dense(
    ids: torch.Tensor, graph: NeighbourGraph, p: float, rho: float, generator: torch.Generator | None
) -> torch.Tensor:
    """SSE-Graph for mini-batches: the same mixture as :func:`_sample_graph`, computed for every id at once.

    Written with as few tensor ops as possible, since for a mini-batch their fixed cost is the whole cost.
    """
    n = graph.num_nodes
    current = ids.reshape(-1).long()
    uniform = torch.rand((3, current.numel()), dtype=torch.float64, generator=generator, device=ids.device)
    # u < 1 so floor(u * (n - 1)) <= n - 2; truncation is floor for non-negative values
    other = (uniform[1] * (n - 1)).long()
    replacement = other.add_(other >= current)
    if graph.num_edges > 0 and rho > 1.0:
        degree = graph.degree[current]
        extra_weight = degree * (rho - 1.0)
        to_neighbour = uniform[2] * (extra_weight + (n - 1)) < extra_weight
        slot = (uniform[1] * degree).long().add_(graph.indptr[current]).clamp_(max=graph.indices.numel() - 1)
        replacement = torch.where(to_neighbour, graph.indices[slot], replacement)
    return torch.where(uniform[0] < p, replacement, current).to(ids.dtype).view(ids.shape)


def _sample_graph(
    ids: torch.Tensor, graph: NeighbourGraph, p: float, rho: float, generator: torch.Generator | None
) -> torch.Tensor:
    """Unchecked core of :func:`sse_graph` (the neighbour / uniform-other mixture)."""
    kernel = _cpu_kernel(ids, generator)
    if kernel is not None:
        return kernel.sse_graph(ids, graph.indptr, graph.indices, p, rho, generator)
    if ids.numel() <= _DENSE_PATH_MAX_IDS:
        return _sample_graph_dense(ids, graph, p, rho, generator)
    out = _fresh_flat_copy(ids)
    positions = _swap_positions(out, p, generator)
    if positions.numel() == 0:
        return out.view(ids.shape)
    n = graph.num_nodes
    current = out[positions].long()
    # one uniform picks the branch, the second picks within the chosen branch (only one branch is used)
    uniform = torch.rand((2, current.numel()), dtype=torch.float64, generator=generator, device=out.device)
    other = torch.floor(uniform[1] * (n - 1)).long().clamp_(max=n - 2)
    replacement = other + (other >= current)
    if graph.num_edges > 0 and rho > 1.0:
        degree = graph.degree[current]
        extra_weight = (rho - 1.0) * degree.to(torch.float64)
        # u < a_j written without a division: u * (rho * deg + N - 1 - deg) < (rho - 1) * deg
        to_neighbour = uniform[0] * (extra_weight + (n - 1)) < extra_weight
        slot = graph.indptr[current] + _uniform_rank(uniform[1], degree)
        slot.clamp_(max=graph.indices.numel() - 1)  # rows without neighbours point past their end; unused
        replacement = torch.where(to_neighbour, graph.indices[slot], replacement)
    out[positions] = replacement.to(out.dtype)
    return out.view(ids.shape)


def _uniform_rank(uniform: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """floor(uniform * count) kept inside [0, count - 1] against float rounding; 0 where count is 0."""
    rank = torch.floor(uniform * count).long()
    return torch.minimum(rank, count - 1).clamp_(min=0)


def _check_generator(generator: torch.Generator | None, ids: torch.Tensor) -> None:
    """Raise when a generator lives on another device type than the ids."""
    if generator is not None and generator.device.type != ids.device.type:
        raise EmbregError(f"generator is on {generator.device} but ids are on {ids.device}")

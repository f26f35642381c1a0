"""The mixed-dimension lookup as a pure function (mixed-dimension-embeddings.txt, Appendix, Alg. 2).

A row at position ``x`` of block ``i`` (``offsets[i] <= x < offsets[i+1]``) is looked up as
``E_i[x - offsets[i]] @ P_i``, or ``E_i[x - offsets[i]]`` where the block has no projection (``d_i == d_bar``).
Instead of Alg. 2's per-index scan over the offsets, the positions are sorted once: blocks are contiguous
ranges of positions, so the sorted positions are grouped by block and the block boundaries are a binary search
of the ``k + 1`` offsets. Each block is then one gather and one matmul, and one gather puts the rows back in
the input order.

:func:`mixed_dimension_lookup` does this in one autograd node with a hand-written backward (the routing is
computed once and reused, no per-block autograd bookkeeping) over k separate tables and projections
(:func:`_lookup_forward` / :func:`_lookup_backward`, shared with :mod:`embreg.embeddings.flat`, the same node
over the two flat parameters a :class:`~embreg.embeddings.MixedDimensionEmbedding` stores).
:func:`mixed_dimension_lookup_reference` is the same computation from differentiable torch ops, kept as the
reference the fast ones are tested against.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

__all__ = ["mixed_dimension_lookup", "mixed_dimension_lookup_reference"]


def _route(flat: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Sorted positions, the sorting permutation and the k + 1 block boundaries in the sorted order."""
    sorted_positions, order = torch.sort(flat)
    bounds = torch.searchsorted(sorted_positions, offsets).tolist()
    return sorted_positions, order, bounds


def _inverse(order: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=order.device))


class _Routing:
    """What the tensor-op lookup's backward needs from its forward: per block, the distinct rows' local indices
    and gathered rows (None for identity blocks or a block no id fell in), and each id's distinct row."""

    def __init__(
        self,
        bounds: list[int],
        locals_: list[torch.Tensor | None],
        rows: list[torch.Tensor | None],
        inverse: torch.Tensor,
        num_distinct: int,
    ):
        self.bounds, self.locals, self.rows = bounds, locals_, rows
        self.inverse, self.num_distinct = inverse, num_distinct


def _lookup_forward(
    flat: torch.Tensor,
    offsets: torch.Tensor,
    weights: Sequence[torch.Tensor],
    projections: Sequence[torch.Tensor | None],
) -> tuple[torch.Tensor, _Routing]:
    """(B, D) vectors of positions ``flat`` (B,): the distinct positions of the batch, sorted (``torch.unique``),
    are grouped by block by a binary search of the offsets; each block gathers and projects its *distinct* rows
    only (popular rows repeat many times in a batch, and they sit in the blocks with the largest ``d_i``), and
    one gather expands them back to the batch."""
    distinct, inverse = torch.unique(flat, sorted=True, return_inverse=True)
    bounds = torch.searchsorted(distinct, offsets).tolist()
    # local row of every distinct position, in three ops for all blocks (not one subtraction per block)
    local_all = distinct - offsets.index_select(0, torch.searchsorted(offsets, distinct, right=True) - 1)
    out_distinct = weights[0].new_empty(distinct.numel(), _output_dim(weights, projections))
    locals_: list[torch.Tensor | None] = []
    rows: list[torch.Tensor | None] = []
    for i, (weight, projection) in enumerate(zip(weights, projections)):
        start, stop = bounds[i], bounds[i + 1]
        if stop == start:
            locals_.append(None)
            rows.append(None)
            continue
        local = local_all[start:stop]
        if projection is None:
            torch.index_select(weight, 0, local, out=out_distinct[start:stop])
            block_rows = None
        else:
            block_rows = weight.index_select(0, local)
            torch.mm(block_rows, projection, out=out_distinct[start:stop])
        locals_.append(local)
        rows.append(block_rows)
    return out_distinct.index_select(0, inverse), _Routing(bounds, locals_, rows, inverse, distinct.numel())


def _lookup_backward(
    routing: _Routing,
    grad_out: torch.Tensor,
    projections: Sequence[torch.Tensor | None],
    needs_weights: bool,
    needs_projections: bool,
) -> list[tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None] | None]:
    """Per block, ``(local, grad of the distinct rows (U_i, d_i) or None, grad P_i (d_i, D) or None)``, or None
    for a block no id fell in: the output gradient is summed per distinct row once (one ``index_add``), then
    ``grad P_i = E_i[u]^T g_u`` and ``grad E_i[u] = g_u P_i^T``."""
    # index_add_ is many times slower on a strided source (e.g. the expanded gradient of a sum())
    grad_out = grad_out.contiguous()
    grad_distinct = grad_out.new_zeros(routing.num_distinct, grad_out.shape[1]).index_add_(0, routing.inverse, grad_out)
    out: list[tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None] | None] = []
    for i, local in enumerate(routing.locals):
        if local is None:
            out.append(None)
            continue
        grad = grad_distinct[routing.bounds[i] : routing.bounds[i + 1]]
        grad_weight: torch.Tensor | None = grad
        grad_projection = None
        projection = projections[i]
        if projection is not None:
            if needs_projections:
                block_rows = routing.rows[i]
                if block_rows is None:  # the forward gathers the rows of every projected block it routes ids to
                    raise RuntimeError(f"block {i} has a projection but its forward kept no gathered rows")
                grad_projection = block_rows.t().mm(grad)
            grad_weight = grad.mm(projection.t()) if needs_weights else None
        out.append((local, grad_weight if needs_weights else None, grad_projection))
    return out


class _MixedDimensionLookup(torch.autograd.Function):
    """One autograd node for the whole lookup over k separate tables. Inputs after the flags: k weights, then k
    projections (or None). See :func:`_lookup_forward` and :func:`_lookup_backward`; the sparse gradient of a
    block is already coalesced (its distinct rows are sorted)."""

    @staticmethod
    def forward(ctx, flat, offsets, sparse, num_blocks, *tensors):  # noqa: D102 (see mixed_dimension_lookup)
        weights, projections = tensors[:num_blocks], tensors[num_blocks:]
        out, ctx.routing = _lookup_forward(flat, offsets, weights, projections)
        ctx.sparse, ctx.num_blocks, ctx.shapes = sparse, num_blocks, [w.shape for w in weights]
        ctx.has_projection = [p is not None for p in projections]
        ctx.save_for_backward(*_projections_or_empty(projections, weights[0]))
        return out

    @staticmethod
    @once_differentiable  # a second derivative through this node raises instead of coming out wrong
    def backward(ctx, grad_out):  # noqa: D102
        k = ctx.num_blocks
        projections = [p if has else None for p, has in zip(ctx.saved_tensors, ctx.has_projection)]
        parts = _lookup_backward(
            ctx.routing, grad_out, projections, any(ctx.needs_input_grad[4 : 4 + k]), any(ctx.needs_input_grad[4 + k :])
        )
        grad_weights, grad_projections = [None] * k, [None] * k
        for i, part in enumerate(parts):
            if part is None:  # no id of the batch falls in this block: no gradient, as if it were not used
                continue
            local, grad, grad_projections[i] = part
            if grad is None:
                continue
            if ctx.sparse:
                grad_weights[i] = torch.sparse_coo_tensor(
                    local.unsqueeze(0), grad, ctx.shapes[i], is_coalesced=True, check_invariants=False
                )
            else:
                grad_weights[i] = grad.new_zeros(ctx.shapes[i]).index_copy_(0, local, grad)
        return (None, None, None, None, *grad_weights, *grad_projections)


def _output_dim(weights: Sequence[torch.Tensor], projections: Sequence[torch.Tensor | None]) -> int:
    """D: the projections' output width, or the first block's width when it is an identity block."""
    return projections[0].shape[1] if projections[0] is not None else weights[0].shape[1]


def _projections_or_empty(projections: Sequence[torch.Tensor | None], like: torch.Tensor) -> list[torch.Tensor]:
    """Projections with ``None`` replaced by an empty tensor (``save_for_backward`` takes tensors only)."""
    return [p if p is not None else like.new_empty(0) for p in projections]


def mixed_dimension_lookup(
    positions: torch.Tensor,
    weights: Sequence[torch.Tensor],
    projections: Sequence[torch.Tensor | None],
    offsets: torch.Tensor,
    *,
    sparse: bool = False,
) -> torch.Tensor:
    """Looks up and projects rows of a block-factored table (Alg. 2, vectorised, one autograd node).

    Args:
        positions: (...) int64 row positions in the blocked order, each in ``[0, offsets[-1])`` (not checked
            here; the modules check).
        weights: k tensors ``E_i`` of shape (n_i, d_i).
        projections: k tensors ``P_i`` of shape (d_i, D), or ``None`` for identity blocks (``d_i == D``).
        offsets: (k + 1,) int64 block start positions, ``offsets[0] == 0``.
        sparse: sparse gradients for the ``E_i`` (projections always get dense gradients).

    Returns:
        (..., D) vectors. Differentiable in every ``E_i`` and ``P_i`` (first order: a second derivative raises;
        use :func:`mixed_dimension_lookup_reference` where second derivatives are needed).

    Example:
        >>> E = [torch.ones(2, 4), torch.ones(3, 2)]
        >>> P = [None, torch.full((2, 4), 0.5)]
        >>> mixed_dimension_lookup(torch.tensor([0, 4]), E, P, torch.tensor([0, 2, 5])).tolist()
        [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    """
    out_dim = _output_dim(weights, projections)
    if positions.numel() == 0:
        return weights[0].new_zeros(*positions.shape, out_dim)
    flat = positions.reshape(-1)
    if len(weights) == 1:
        vectors = F.embedding(flat, weights[0], sparse=sparse)
        vectors = vectors if projections[0] is None else vectors @ projections[0]
        return vectors.reshape(*positions.shape, out_dim)
    out = _MixedDimensionLookup.apply(flat, offsets, sparse, len(weights), *weights, *projections)
    return out.reshape(*positions.shape, out_dim)


def mixed_dimension_lookup_reference(
    positions: torch.Tensor,
    weights: Sequence[torch.Tensor],
    projections: Sequence[torch.Tensor | None],
    offsets: torch.Tensor,
    *,
    sparse: bool = False,
) -> torch.Tensor:
    """:func:`mixed_dimension_lookup` from differentiable torch ops (one gather and matmul per block); twice
    differentiable, slower. Same arguments and result."""
    out_dim = _output_dim(weights, projections)
    if positions.numel() == 0:
        return weights[0].new_zeros(*positions.shape, out_dim)
    flat = positions.reshape(-1)
    sorted_positions, order, bounds = _route(flat, offsets)
    parts = []
    for i, (weight, projection) in enumerate(zip(weights, projections)):
        if bounds[i + 1] == bounds[i]:
            continue
        vectors = F.embedding(sorted_positions[bounds[i] : bounds[i + 1]] - offsets[i], weight, sparse=sparse)
        parts.append(vectors if projection is None else vectors @ projection)
    stacked = torch.cat(parts) if len(parts) > 1 else parts[0]
    return stacked.index_select(0, _inverse(order)).reshape(*positions.shape, out_dim)

"""The mixed-dimension lookup over two flat parameters, the storage of a ``MixedDimensionEmbedding``.

mixed-dimension-embeddings.txt, Sec. III and Appendix, Alg. 2: the same lookup as
:func:`embreg.embeddings.functional.mixed_dimension_lookup`, over ``flat_rows`` (every block's rows ``E_i``,
row-major, one after the other) and ``flat_projections`` (the ``P_i`` of the blocks with ``d_i != D``, in
block order) instead of k tables and k projections, so autograd accumulates two gradients per step instead of
2k (an accumulation node and, for sparse tables, a sparse tensor each: most of a small step's fixed cost). On
the CPU with float32 parameters the fused C++ kernel of :mod:`embreg.embeddings._kernel` computes it (unless
``EMBREG_MD_KERNEL=off``); elsewhere :class:`_FlatMixedDimensionLookup`, the tensor-op node.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import torch
from torch.autograd.function import once_differentiable

from embreg.embeddings._kernel import fused_lookup
from embreg.embeddings.functional import _lookup_backward, _lookup_forward
from embreg.errors import EmbregError

__all__ = ["flat_mixed_dimension_lookup", "split_flat"]


def flat_mixed_dimension_lookup(
    positions: torch.Tensor,
    flat_rows: torch.Tensor,
    flat_projections: torch.Tensor,
    block_rows: Sequence[int],
    block_dims: Sequence[int],
    offsets: torch.Tensor,
    base_dim: int,
    *,
    sparse: bool = False,
) -> torch.Tensor:
    """:func:`~embreg.embeddings.functional.mixed_dimension_lookup` over flat parameters (the storage of
    :class:`~embreg.embeddings.MixedDimensionEmbedding`; see :func:`split_flat`), in one autograd node.

    Args:
        positions: (...) int64 row positions in the blocked order, each in ``[0, offsets[-1])``.
        flat_rows: (sum_i n_i d_i,) every block's rows ``E_i``, row-major, one after the other.
        flat_projections: (sum_{d_i != D} d_i D,) the projections ``P_i`` of the non-identity blocks, in order.
        block_rows, block_dims: n_i and d_i per block; base_dim: D.
        offsets: (k + 1,) int64 block start positions.
        sparse: a sparse gradient for ``flat_rows`` (one entry per value of each distinct row of the batch);
            ``flat_projections`` always gets a dense one.

    Returns:
        (..., D) vectors, differentiable (first order) in both flat parameters. On the CPU with float32
        parameters the fused kernel computes it (see :mod:`embreg.embeddings._kernel`); it range-checks the
        positions and raises ``RuntimeError`` naming the first one outside ``[0, offsets[-1])``.

    Example:
        >>> flat_rows, flat_projections = torch.ones(7), torch.full((2,), 0.5)  # E_0 (2, 2), E_1 (3, 1); P_1 (1, 2)
        >>> out = flat_mixed_dimension_lookup(torch.tensor([0, 4]), flat_rows, flat_projections, [2, 3], [2, 1],
        ...                                   torch.tensor([0, 2, 5]), 2)
        >>> out.tolist()
        [[1.0, 1.0], [0.5, 0.5]]
    """
    if positions.numel() == 0:
        return flat_rows.new_zeros(*positions.shape, base_dim)
    out = fused_lookup(positions, None, offsets, flat_rows, flat_projections, block_dims, base_dim, sparse=sparse)
    if out is not None:  # None: the kernel does not serve these ids or parameters (e.g. CUDA, float64)
        return out
    layout = (tuple(block_rows), tuple(block_dims), base_dim)
    out = _FlatMixedDimensionLookup.apply(positions.reshape(-1), offsets, sparse, layout, flat_rows, flat_projections)
    return out.reshape(*positions.shape, base_dim)


class _FlatMixedDimensionLookup(torch.autograd.Function):
    """The same node over the two flat parameters of :class:`~embreg.embeddings.MixedDimensionEmbedding` (every
    block's rows, one after the other; every non-identity block's projection, one after the other), so autograd
    accumulates two gradients instead of 2k. The flat rows' sparse gradient has one entry per value of a
    distinct row, in increasing order."""

    @staticmethod
    def forward(ctx, flat, offsets, sparse, layout, flat_rows, flat_projections):  # noqa: D102
        weights, projections = split_flat(flat_rows, flat_projections, *layout)
        out, ctx.routing = _lookup_forward(flat, offsets, weights, projections)
        ctx.sparse, ctx.layout = sparse, layout
        ctx.save_for_backward(flat_projections)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):  # noqa: D102
        (flat_projections,) = ctx.saved_tensors
        block_rows, block_dims, base_dim = ctx.layout
        _, projections = split_flat(None, flat_projections, *ctx.layout)
        needs_rows, needs_projections = ctx.needs_input_grad[4], ctx.needs_input_grad[5]
        parts = _lookup_backward(ctx.routing, grad_out, projections, needs_rows, needs_projections)
        row_starts = [0, *accumulate(n * d for n, d in zip(block_rows, block_dims))]
        projection_starts = [0, *accumulate(d * base_dim if d != base_dim else 0 for d in block_dims)]
        grad_rows = grad_projections = None
        if needs_projections and flat_projections.numel() > 0:  # as the kernel: no gradient for no projections
            grad_projections = grad_out.new_zeros(flat_projections.shape)
        if needs_rows and not ctx.sparse:
            grad_rows = grad_out.new_zeros(row_starts[-1])
        indices, values = [], []
        for i, part in enumerate(parts):
            if part is None:
                continue
            local, grad, grad_projection = part
            d = block_dims[i]
            if grad_projection is not None:
                grad_projections[projection_starts[i] : projection_starts[i + 1]].view(d, base_dim).copy_(
                    grad_projection
                )
            if grad is None:
                continue
            if ctx.sparse:
                columns = torch.arange(d, device=local.device)
                indices.append((row_starts[i] + local.unsqueeze(1) * d + columns).reshape(-1))
                values.append(grad.reshape(-1))
            else:
                grad_rows[row_starts[i] : row_starts[i + 1]].view(block_rows[i], d).index_copy_(0, local, grad)
        if needs_rows and ctx.sparse:
            grad_rows = torch.sparse_coo_tensor(
                torch.cat(indices).unsqueeze(0),
                torch.cat(values),
                (row_starts[-1],),
                is_coalesced=True,
                check_invariants=False,
            )
        return None, None, None, None, grad_rows, grad_projections


def split_flat(
    flat_rows: torch.Tensor | None,
    flat_projections: torch.Tensor | None,
    block_rows: Sequence[int],
    block_dims: Sequence[int],
    base_dim: int,
) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """Views of flat parameters as k tables ``E_i`` (n_i, d_i) and k projections ``P_i`` (d_i, D) or None.

    ``flat_rows`` holds ``E_0, E_1, ...`` row-major one after the other; ``flat_projections`` the ``P_i`` of the
    blocks with ``d_i != D``, in block order. ``flat_rows=None`` gives no tables (an empty list).

    Example:
        >>> weights, projections = split_flat(torch.arange(10.0), torch.zeros(16), [2, 3], [2, 2], 4)
        >>> [tuple(w.shape) for w in weights], [tuple(p.shape) for p in projections]
        ([(2, 2), (3, 2)], [(2, 4), (2, 4)])
    """
    weights: list[torch.Tensor] = []
    projections: list[torch.Tensor | None] = []
    row, projection = 0, 0
    for n, d in zip(block_rows, block_dims):
        if flat_rows is not None:
            weights.append(flat_rows[row : row + n * d].view(n, d))
        row += n * d
        if d == base_dim:
            projections.append(None)
        elif flat_projections is None:
            raise EmbregError(
                f"block dims {list(block_dims)} need projections to base_dim={base_dim}; flat_projections is None"
            )
        else:
            projections.append(flat_projections[projection : projection + d * base_dim].view(d, base_dim))
            projection += d * base_dim
    return weights, projections

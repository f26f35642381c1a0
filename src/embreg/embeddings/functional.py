"""The mixed-dimension lookup as a pure function (mixed-dimension-embeddings.txt, Appendix, Alg. 2).

A row at position ``x`` of block ``i`` (``offsets[i] <= x < offsets[i+1]``) is looked up as
``E_i[x - offsets[i]] @ P_i``, or ``E_i[x - offsets[i]]`` where the block has no projection (``d_i == d_bar``).
Instead of Alg. 2's per-index scan over the offsets, all ids are assigned to blocks at once with a binary
search, grouped by block with one stable sort, looked up and projected block by block (one gather and one
matmul per block), and gathered back into their original order.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

__all__ = ["mixed_dimension_lookup"]


def _lookup_block(local: torch.Tensor, weight: torch.Tensor, projection: torch.Tensor | None,
                  sparse: bool) -> torch.Tensor:
    vectors = F.embedding(local, weight, sparse=sparse)
    return vectors if projection is None else vectors @ projection


def mixed_dimension_lookup(
    positions: torch.Tensor,
    weights: Sequence[torch.Tensor],
    projections: Sequence[torch.Tensor | None],
    offsets: torch.Tensor,
    *,
    sparse: bool = False,
) -> torch.Tensor:
    """Looks up and projects rows of a block-factored table (Alg. 2, vectorised).

    Args:
        positions: (...) int64 row positions in the blocked order, each in ``[0, offsets[-1])`` (not checked
            here; the modules check).
        weights: k tensors ``E_i`` of shape (n_i, d_i).
        projections: k tensors ``P_i`` of shape (d_i, D), or ``None`` for identity blocks (``d_i == D``).
        offsets: (k + 1,) int64 block start positions, ``offsets[0] == 0``.
        sparse: sparse gradients for the ``E_i`` (projections always get dense gradients).

    Returns:
        (..., D) vectors.

    Example:
        >>> E = [torch.ones(2, 4), torch.ones(3, 2)]
        >>> P = [None, torch.full((2, 4), 0.5)]
        >>> mixed_dimension_lookup(torch.tensor([0, 4]), E, P, torch.tensor([0, 2, 5])).tolist()
        [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    """
    flat = positions.reshape(-1)
    out_dim = projections[0].shape[1] if projections[0] is not None else weights[0].shape[1]
    if len(weights) == 1:
        return _lookup_block(flat, weights[0], projections[0], sparse).reshape(*positions.shape, out_dim)
    blocks = torch.searchsorted(offsets[1:], flat, right=True)
    order = torch.sort(blocks, stable=True).indices
    counts = torch.bincount(blocks, minlength=len(weights)).tolist()
    grouped = flat.index_select(0, order)  # index_select: much faster than advanced indexing on CPU
    parts = []
    start = 0
    for i, count in enumerate(counts):
        if count == 0:
            continue
        local = grouped[start:start + count] - offsets[i]
        parts.append(_lookup_block(local, weights[i], projections[i], sparse))
        start += count
    if not parts:
        return weights[0].new_zeros(*positions.shape, out_dim)
    stacked = torch.cat(parts) if len(parts) > 1 else parts[0]
    # back to the input order with a gather (index_select), much faster on CPU than scattering with index_copy
    inverse = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=order.device))
    return stacked.index_select(0, inverse).reshape(*positions.shape, out_dim)

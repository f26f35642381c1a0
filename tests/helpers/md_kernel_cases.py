"""Shared cases for the MD kernel tests (test_md_kernel.py, test_md_kernel_isa.py): a small blocked layer, and its
output and gradients through the fused kernel or through the flat tensor-op node."""

from __future__ import annotations

import torch

from embreg.embeddings import MixedDimensionEmbedding, _kernel, equipartition_blocks, flat


def small_layer(
    sparse: bool = False, rows: int = 300, dims=(16, 9, 4, 1), dtype=torch.float32
) -> MixedDimensionEmbedding:
    """``rows`` rows with power-law frequencies in ``len(dims)`` equal-mass blocks of dims ``dims`` (base
    ``dims[0]``)."""
    torch.manual_seed(0)
    freq = torch.arange(rows, 0, -1, dtype=torch.float64) ** -1.1
    blocking = equipartition_blocks(freq[torch.randperm(rows)], len(dims))
    return MixedDimensionEmbedding.from_blocking(blocking, list(dims), dims[0], sparse=sparse, dtype=dtype)


def values_and_grads(layer: MixedDimensionEmbedding, ids: torch.Tensor, upstream: torch.Tensor, fused: bool):
    """Output and both parameters' (dense) gradients after ``out.backward(upstream)`` (its strides reach the
    backward as they are), through the kernel (``_kernel.fused_lookup``) or through the tensor-op node."""
    for p in layer.parameters():
        p.grad = None
    if fused:
        out = _kernel.fused_lookup(
            ids,
            layer.index_map,
            layer.offsets,
            layer.flat_rows,
            layer.flat_projections,
            layer.block_dims,
            layer.embedding_dim,
            sparse=layer.sparse,
        )
    else:
        positions = layer.positions(ids).reshape(-1)
        out = flat._FlatMixedDimensionLookup.apply(
            positions, layer.offsets, layer.sparse, layer.layout, layer.flat_rows, layer.flat_projections
        ).reshape(*ids.shape, -1)
    out.backward(upstream)
    grads = [
        None if p.grad is None else (p.grad.to_dense() if p.grad.is_sparse else p.grad) for p in layer.parameters()
    ]
    return out.detach(), grads

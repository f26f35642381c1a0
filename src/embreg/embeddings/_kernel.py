"""The fused C++ CPU kernel of the mixed-dimension lookup (``csrc/md_lookup.cpp``), as one autograd node.

mixed-dimension-embeddings.txt, Appendix, Alg. 2: the same lookup and gradients as
:class:`embreg.embeddings.functional._MixedDimensionLookup`, in two C++ calls per training step instead of
some forty tensor ops (whose fixed per-op cost and temporaries were most of a step's time; see
docs/results/mixed-dimension.md, Section 3). It is compiled for the host's instruction set, once, and cached
(:class:`embreg._native.NativeKernel`).

``EMBREG_MD_KERNEL`` chooses the backend: ``auto`` (default; the kernel when it builds, else the tensor ops
after one warning), ``off`` (always the tensor ops) or ``on`` (the kernel, raise if it cannot be built). The
kernel serves float32 tables on the CPU; everything else (other dtypes, CUDA) takes the tensor ops. Like
the tensor-op node, it gives first derivatives only (a second one raises). Both backends give the same
values up to float rounding; the kernel's sparse gradients have distinct but unsorted indices, so they are
not marked coalesced.

Example:
    >>> weights, projections = [torch.ones(2, 4), torch.ones(3, 2)], [None, torch.full((2, 4), 0.5)]
    >>> offsets = torch.tensor([0, 2, 5])
    >>> if fused_kernel() is not None:
    ...     print(fused_lookup(torch.tensor([0, 4]), None, weights, projections, offsets, sparse=False).tolist())
    ... else:
    ...     print([[1.0] * 4] * 2)
    [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import torch
from torch.autograd.function import once_differentiable

from embreg._native import NativeKernel

__all__ = ["fused_kernel", "fused_lookup", "kernel_applies"]

_KERNEL = NativeKernel("embreg_md_lookup", Path(__file__).with_name("csrc") / "md_lookup.cpp", "EMBREG_MD_KERNEL",
                       "mixed-dimension lookup", native_isa=True)
_NO_TENSOR = torch.empty(0)


def fused_kernel() -> ModuleType | None:
    """The compiled kernel, or None (mode ``off``, or ``auto`` on a machine that cannot build it)."""
    return _KERNEL.load()


def kernel_applies(weights: Sequence[torch.Tensor], projections: Sequence[torch.Tensor | None]) -> bool:
    """Whether the kernel can serve these tables: float32, contiguous, on the CPU (and the kernel is built)."""
    for t in (*weights, *projections):
        if t is not None and (t.dtype != torch.float32 or t.device.type != "cpu" or not t.is_contiguous()):
            return False
    return fused_kernel() is not None


class _FusedLookup(torch.autograd.Function):
    """Inputs after the flags: k weights, then k projections (or None). See csrc/md_lookup.cpp."""

    @staticmethod
    def forward(ctx, ids, index_map, offsets, sparse, num_blocks, out_dim, *tensors):  # noqa: D102
        kernel = fused_kernel()
        weights = list(tensors[:num_blocks])
        projections = [p if p is not None else _NO_TENSOR for p in tensors[num_blocks:]]
        out, inverse, local, bounds, rows, first = kernel.forward(
            ids, index_map if index_map is not None else _NO_TENSOR, offsets, weights, projections, out_dim)
        ctx.sparse = sparse
        ctx.shapes = ([w.shape[0] for w in weights], [w.shape[1] for w in weights])
        # the backward reads the gathered rows, not the tables, so only the projections are saved
        ctx.save_for_backward(inverse, local, bounds, rows, first, *projections)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):  # noqa: D102
        inverse, local, bounds, rows, first, *projections = ctx.saved_tensors
        grads = fused_kernel().backward(grad_out, inverse, local, bounds, rows, first, *ctx.shapes, projections,
                                        ctx.sparse)
        grads = [g if ctx.needs_input_grad[6 + i] else None for i, g in enumerate(grads)]
        return (None, None, None, None, None, None, *grads)


def fused_lookup(ids: torch.Tensor, index_map: torch.Tensor | None, weights: Sequence[torch.Tensor],
                 projections: Sequence[torch.Tensor | None], offsets: torch.Tensor, *, sparse: bool) -> torch.Tensor:
    """The lookup through the kernel (check :func:`kernel_applies` first).

    Args:
        ids: (...) integer ids; each must be in ``[0, offsets[-1])`` (the kernel raises ``RuntimeError``
            naming the first one that is not).
        index_map: (N,) int32/int64 position of each id in the blocked order, or None (ids are positions).
        weights, projections, offsets, sparse: as :func:`embreg.embeddings.functional.mixed_dimension_lookup`.

    Returns:
        (..., D) float32 vectors.
    """
    out_dim = projections[0].shape[1] if projections[0] is not None else weights[0].shape[1]
    flat = ids.reshape(-1).to(torch.int64).contiguous()
    if index_map is not None and index_map.dtype not in (torch.int32, torch.int64):
        index_map = index_map.to(torch.int64)
    if index_map is not None:
        index_map = index_map.contiguous()
    out = _FusedLookup.apply(flat, index_map, offsets, sparse, len(weights), out_dim, *weights, *projections)
    return out.reshape(*ids.shape, out_dim)

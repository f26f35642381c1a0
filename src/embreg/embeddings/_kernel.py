"""The fused C++ CPU kernel of the mixed-dimension lookup (``csrc/md_lookup.cpp``), a C++ autograd node.

mixed-dimension-embeddings.txt, Appendix, Alg. 2: the same lookup and gradients as
:class:`embreg.embeddings.functional._MixedDimensionLookup`, as one autograd node written in C++ (no Python in
its forward or backward) instead of some forty tensor ops (whose fixed per-op cost and temporaries were most of
a step's time; see docs/results/mixed-dimension.md, Section 3). It is compiled for the host's instruction set,
once, and cached (:class:`embreg._native.NativeKernel`).

``EMBREG_MD_KERNEL`` chooses the backend: ``auto`` (default; the kernel when it builds, else the tensor ops
after one warning), ``off`` (always the tensor ops) or ``on`` (the kernel, raise if it cannot be built). The
kernel serves float32 tables on the CPU; everything else (other dtypes, CUDA) takes the tensor ops. Like
the tensor-op node, it gives first derivatives only: a backward with ``create_graph=True`` through it
raises (the tensor-op node raises one step later, when its gradient is differentiated). Both backends give
the same values up to float rounding; the kernel's sparse gradients have distinct but unsorted indices, so
they are not marked coalesced.

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

from embreg._native import NativeKernel

__all__ = ["fused_kernel", "fused_lookup", "kernel_applies"]

_KERNEL = NativeKernel("embreg_md_lookup", Path(__file__).with_name("csrc") / "md_lookup.cpp", "EMBREG_MD_KERNEL",
                       "mixed-dimension lookup", native_isa=True)


def fused_kernel() -> ModuleType | None:
    """The compiled kernel, or None (mode ``off``, or ``auto`` on a machine that cannot build it)."""
    return _KERNEL.load()


def kernel_applies(weights: Sequence[torch.Tensor], projections: Sequence[torch.Tensor | None]) -> bool:
    """Whether the kernel is built and can serve these tables (float32, contiguous, on the CPU)."""
    kernel = fused_kernel()
    return kernel is not None and kernel.tables_supported(list(weights), list(projections))


def fused_lookup(ids: torch.Tensor, index_map: torch.Tensor | None, weights: Sequence[torch.Tensor],
                 projections: Sequence[torch.Tensor | None], offsets: torch.Tensor, *,
                 sparse: bool) -> torch.Tensor | None:
    """The lookup through the kernel, or None where it does not apply (see :func:`kernel_applies`; the kernel
    checks the tables itself, so a hot loop pays no Python check per table).

    Args:
        ids: (...) integer ids on the CPU; each must be in ``[0, offsets[-1])`` (the kernel raises
            ``RuntimeError`` naming the first one that is not).
        index_map: (N,) int32/int64 position of each id in the blocked order, or None (ids are positions).
        weights, projections, offsets, sparse: as :func:`embreg.embeddings.functional.mixed_dimension_lookup`.

    Returns:
        (..., D) float32 vectors, or None.
    """
    kernel = fused_kernel()
    return None if kernel is None else kernel.lookup(ids, index_map, offsets, sparse, weights, projections)

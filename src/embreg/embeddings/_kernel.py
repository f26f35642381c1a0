"""The fused C++ CPU kernel of the mixed-dimension lookup (``csrc/md_lookup.cpp``), a C++ autograd node.

mixed-dimension-embeddings.txt, Appendix, Alg. 2: the same lookup and gradients as
:class:`embreg.embeddings.flat._FlatMixedDimensionLookup`, as one autograd node written in C++ (no
Python in its forward or backward) over the layer's two flat parameters, instead of some forty tensor ops
(whose fixed per-op cost and temporaries were most of a step's time; see docs/results/mixed-dimension.md,
Section 3). It is compiled for the host's instruction set,
once, and cached (:class:`embreg._native.NativeKernel`).

``EMBREG_MD_KERNEL`` chooses the backend: ``auto`` (default; the kernel when it builds, else the tensor ops
after one warning), ``off`` (always the tensor ops) or ``on`` (the kernel, raise if it cannot be built). The
kernel serves float32 parameters on the CPU; everything else (other dtypes, CUDA) takes the tensor ops. Like
the tensor-op node, it gives first derivatives only: a backward with ``create_graph=True`` through it
raises (the tensor-op node raises one step later, when its gradient is differentiated). Both backends give
the same values up to float rounding; the kernel's sparse gradient has distinct but unsorted indices, so
it is not marked coalesced.

Example:
    >>> flat_rows, flat_projections = torch.ones(14), torch.full((8,), 0.5)  # E_0 (2, 4), E_1 (3, 2), P_1 (2, 4)
    >>> offsets = torch.tensor([0, 2, 5])
    >>> if fused_kernel() is not None:
    ...     out = fused_lookup(torch.tensor([0, 4]), None, offsets, flat_rows, flat_projections, [4, 2], 4,
    ...                        sparse=False)
    ...     print(out.tolist())
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

_KERNEL = NativeKernel(
    "embreg_md_lookup",
    Path(__file__).with_name("csrc") / "md_lookup.cpp",
    "EMBREG_MD_KERNEL",
    "mixed-dimension lookup",
    native_isa=True,
    record_key="md",
)


def fused_kernel() -> ModuleType | None:
    """The compiled kernel, or None (mode ``off``, or ``auto`` on a machine that cannot build it)."""
    return _KERNEL.load()


def kernel_applies(flat_rows: torch.Tensor, flat_projections: torch.Tensor) -> bool:
    """Whether the kernel is built and can serve these flat parameters (1-d, float32, contiguous, on the CPU)."""
    kernel = fused_kernel()
    return kernel is not None and kernel.tables_supported(flat_rows, flat_projections)


def fused_lookup(
    ids: torch.Tensor,
    index_map: torch.Tensor | None,
    offsets: torch.Tensor,
    flat_rows: torch.Tensor,
    flat_projections: torch.Tensor | None,
    block_dims: Sequence[int],
    base_dim: int,
    *,
    sparse: bool,
) -> torch.Tensor | None:
    """The lookup through the kernel, or None where it does not apply: parameters it does not serve (see
    :func:`kernel_applies`), ids that are not int64/int32/int16/int8/uint8 on the CPU, or an empty batch. The
    kernel makes these checks itself, so a hot loop pays no Python check per call. ``MixedDimensionEmbedding``
    calls the compiled module itself, with the same arguments, to save this call on each step.

    Args:
        ids: (...) integer ids; each must be in ``[0, offsets[-1])`` (the kernel raises ``RuntimeError``
            naming the first one that is not).
        index_map: (N,) int32/int64 position of each id in the blocked order, or None (ids are positions).
        offsets: (k + 1,) int64 block start positions.
        flat_rows, block_dims, base_dim, sparse: as :func:`embreg.embeddings.flat.flat_mixed_dimension_lookup`.
        flat_projections: as there, or None when every block is at the base dimension.

    Returns:
        (..., D) float32 vectors, or None.
    """
    kernel = fused_kernel()
    if kernel is None:
        return None
    return kernel.lookup(ids, index_map, offsets, sparse, flat_rows, flat_projections, block_dims, base_dim)

"""The fused CPU sampler kernel of SSE: built once from ``csrc/sse_sampler.cpp``, then loaded from a cache.

A mini-batch SSE call written with tensor ops pays a fixed ~3 µs per op, which on a 1024-id batch is the whole
cost (see docs/results/sse-speed.md). The C++ kernel does the same sampling in one pass. It is built and
cached by :class:`embreg._native.NativeKernel` (compiled once into ``$EMBREG_KERNEL_DIR``).

``EMBREG_SSE_KERNEL`` chooses the CPU backend:

* ``auto`` (default): use the kernel when it builds; otherwise warn once and use the tensor-op samplers;
* ``off``: always use the tensor-op samplers (e.g. to reproduce a stream drawn with them);
* ``on``: use the kernel and raise if it cannot be built.

Both backends draw from the same laws (eq. 3 and 5) but not the same random streams. On CUDA the same variable
chooses between the Triton sampler of SSE-SE (:mod:`embreg.sse._cuda_sampler`) and the tensor ops; SSE-Graph on
CUDA always takes the tensor ops.

Example:
    >>> kernel = fused_kernel()          # the compiled module, or None
    >>> backend_name() in ("cpp", "torch")
    True
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

from embreg._native import NativeKernel
from embreg.sse._validation import check_ids_range

__all__ = ["backend_name", "fused_kernel", "kernel_mode", "with_range_error"]

_KERNEL = NativeKernel(
    "embreg_sse_sampler",
    Path(__file__).with_name("csrc") / "sse_sampler.cpp",
    "EMBREG_SSE_KERNEL",
    "SSE",
    record_key="sse",
)


def kernel_mode() -> str:
    """The value of ``EMBREG_SSE_KERNEL`` (``auto`` when unset), checked."""
    return _KERNEL.mode()


def fused_kernel() -> ModuleType | None:
    """The compiled kernel module, or None when the mode is ``off`` or (in ``auto``) it cannot be built.

    The build is attempted at most once per process; ``on`` raises :class:`EmbregError` with the reason.
    """
    return _KERNEL.load()


def with_range_error(ids: torch.Tensor, num_embeddings: int, call: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``call()`` of the kernel; when it rejects an id, raise the library's range error (naming the values) instead."""
    try:
        return call()
    except RuntimeError:
        check_ids_range(ids, num_embeddings)
        raise


def backend_name() -> str:
    """``cpp`` when CPU ids take the fused kernel, else ``torch``."""
    return "cpp" if fused_kernel() is not None else "torch"

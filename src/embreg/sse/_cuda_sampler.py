"""The fused CUDA sampler of SSE-SE: one Triton kernel draws the swap decision and the replacement of every id.

sse-stochastic-shared-embeddings.txt, eq. 5: each id j is kept with probability 1 - p, else replaced by an id
drawn uniformly among the other N - 1. Written with tensor ops (``torch.rand``, ``<``, ``torch.randint``, ``>=``,
``+``, ``torch.where``) a mini-batch call launches six kernels, each with PyTorch's fixed per-op cost; on a GPU
training step of a few milliseconds that is several percent of the step (docs/results/gpu-step-cost). This
kernel does the whole draw in one launch, reading its random numbers from the transform's own CUDA generator
without a host synchronisation.

The law, exactly as implemented: per id, one Philox-4x32-10 draw gives four 32-bit words ``r0 .. r3``. The id
is swapped when ``r0 < round(p * 2**32)`` (so the swap probability is p to within 2**-33), and the
replacement is ``rank = (r1 * 2**32 + r2) mod M`` mapped past the excluded values in increasing order, where
M = N - 1 (the id itself excluded) or N - 2 (also a padding class excluded). ``rank`` is uniform up to a
relative bias below M / 2**64 (about 5e-14 at a million ids): no sampler in this library can detect it.

Randomness: the Philox key is the generator's seed and the counter is (position, offset low, offset high,
``_STREAM_TAG``), where offset is the generator's Philox offset, advanced by 4 per call (the step PyTorch's
CUDA generators require). The generator's state, and so a checkpoint of it, therefore carries the stream
exactly; the tag keeps the counters apart from the ones PyTorch's own CUDA kernels draw from the same
generator. The stream differs from the tensor-op sampler's (as the C++ CPU kernel's does); the law is the same.

The kernel needs Triton, which PyTorch's CUDA builds install. ``EMBREG_SSE_KERNEL`` chooses the backend on CUDA
as on the CPU: ``auto`` (the kernel when Triton imports, else tensor ops), ``off`` (tensor ops), ``on`` (the
kernel, or :class:`~embreg.errors.EmbregError` when Triton is missing).

Example:
    >>> ids = torch.tensor([3, 1, 4, 1, 5])
    >>> cuda_sampler(ids) is None            # CPU ids (or no Triton): the caller takes its own path
    True
"""

from __future__ import annotations

import functools
import warnings
from types import ModuleType
from typing import Any

import torch

from embreg._native import check_backend, record_backend
from embreg.errors import EmbregError
from embreg.sse._kernel import kernel_mode
from embreg.sse._validation import check_ids_dtype

__all__ = ["cuda_sampler", "philox_counter", "sse_se_cuda", "launch_sse_se"]

_BLOCK = 1024
_OFFSET_STEP = 4  # PyTorch's CUDA generators keep their Philox offset a multiple of 4
_STREAM_TAG = 0x53534531  # 'SSE1': the fourth counter word of every draw; PyTorch's kernels leave theirs at 0
_TWO_32 = 1 << 32
_USED: set[str] = set()  # the backends SSE-SE on CUDA ids took in this process (``triton``, ``torch``)


def _cuda_backend() -> str:
    """``sse_cuda_backend`` of the run record: ``triton``, ``torch``, ``triton+torch`` or ``unused``."""
    return "+".join(sorted(_USED, reverse=True)) or "unused"


record_backend("sse_cuda", _cuda_backend)


@functools.cache
def _triton() -> ModuleType | None:
    """The kernel namespace, or None where Triton is missing or broken (tried once per process; a broken
    install warns once, a missing one is silent: the tensor ops are then the backend)."""
    try:
        return _compile()
    except ImportError:
        return None
    except Exception as error:  # e.g. a Triton that does not fit this PyTorch
        warnings.warn(
            f"embreg's CUDA SSE sampler cannot use Triton, so SSE on CUDA takes tensor ops "
            f"(set EMBREG_SSE_KERNEL=off to silence this): {type(error).__name__}: {error}",
            RuntimeWarning,
            stacklevel=4,
        )
        return None


def _compile() -> ModuleType:
    """A namespace holding the jitted kernel (built lazily, so importing embreg never imports Triton)."""
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["n", "count", "threshold", "offset_lo", "offset_hi", "keep_value", "excluded"])
    def sse_se_kernel(  # pragma: no cover - runs on the GPU (or in Triton's interpreter)
        ids_ptr,
        out_ptr,
        n,
        count,
        threshold,
        seed,
        offset_lo,
        offset_hi,
        keep_value,
        excluded,
        HAS_KEEP: tl.constexpr,
        HAS_EXCLUDED: tl.constexpr,
        STREAM_TAG: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        position = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = position < n
        current = tl.load(ids_ptr + position, mask=inside, other=0).to(tl.int64)
        c0 = position.to(tl.uint32)
        zero = c0 * 0
        c1 = zero + offset_lo.to(tl.uint32)
        c2 = zero + offset_hi.to(tl.uint32)
        r0, r1, r2, _ = tl.philox(seed, c0, c1, c2, zero + STREAM_TAG)
        swap = r0.to(tl.int64) < threshold
        if HAS_KEEP:
            swap = swap & (current != keep_value)
        wide = (r1.to(tl.uint64) << 32) | r2.to(tl.uint64)
        rank = (wide % count.to(tl.uint64)).to(tl.int64)
        if HAS_EXCLUDED:
            low = tl.minimum(current, excluded)
            high = tl.maximum(current, excluded)
            rank += (rank >= low).to(tl.int64)
            rank += (rank >= high).to(tl.int64)
        else:
            rank += (rank >= current).to(tl.int64)
        chosen = tl.where(swap, rank, current)
        tl.store(out_ptr + position, chosen.to(out_ptr.dtype.element_ty), mask=inside)

    namespace = ModuleType("embreg_sse_triton")
    namespace.sse_se_kernel = sse_se_kernel  # type: ignore[attr-defined]
    namespace.cdiv = triton.cdiv  # type: ignore[attr-defined]
    return namespace


def cuda_sampler(ids: torch.Tensor) -> ModuleType | None:
    """The kernel namespace when ``ids`` are CUDA ids and the backend is the kernel, else None.

    Raises:
        EmbregError: ``EMBREG_SSE_KERNEL=on`` and Triton cannot be imported.
    """
    if ids.device.type != "cuda":
        return None
    mode = kernel_mode()
    kernel = None if mode == "off" else _triton()
    if kernel is None and mode == "on":
        raise EmbregError("EMBREG_SSE_KERNEL=on but the CUDA SSE sampler needs Triton, which cannot be imported")
    _USED.add("torch" if kernel is None else "triton")
    if kernel is not None:
        check_backend("sse_cuda", "triton", "Triton imports here", "set EMBREG_SSE_KERNEL=off")
    elif mode == "off":
        check_backend("sse_cuda", "torch", "EMBREG_SSE_KERNEL=off", "unset EMBREG_SSE_KERNEL (or set it to auto)")
    else:
        check_backend("sse_cuda", "torch", "Triton cannot be imported", "install Triton (pip install triton)")
    return kernel


def philox_counter(generator: torch.Generator) -> tuple[int, int]:
    """(seed, offset) of a CUDA generator's next draw; advances its offset past this one (no device sync)."""
    offset = generator.get_offset()
    generator.set_offset(offset + _OFFSET_STEP)
    return generator.initial_seed(), offset


def launch_sse_se(
    kernel: Any,
    ids: torch.Tensor,
    num_embeddings: int,
    p: float,
    seed: int,
    offset: int,
    *,
    keep_value: int | None = None,
    excluded: int | None = None,
) -> torch.Tensor:
    """Run the kernel on ``ids`` with Philox key ``seed`` and counter offset ``offset``; returns new ids.

    Args:
        kernel: the namespace from :func:`cuda_sampler` (or Triton's interpreter in tests).
        ids: integer ids of any shape, each in [0, N) or equal to ``keep_value``; their values are unchecked,
            their dtype must hold N - 1 (checked: no host synchronisation).
        num_embeddings: N.
        p: swap probability in [0, 1].
        seed, offset: the Philox key and counter offset (:func:`philox_counter`).
        keep_value: ids equal to it are never swapped (a label's ``ignore_index``), or None.
        excluded: an id in [0, N) never drawn as a replacement (a padding class), or None.

    Returns:
        A tensor with the shape, dtype and device of ``ids``.
    """
    check_ids_dtype(ids, num_embeddings)
    flat = ids.reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    out = torch.empty_like(flat)
    n = flat.numel()
    count = num_embeddings - 1 - (excluded is not None)
    threshold = min(round(p * _TWO_32), _TWO_32)
    kernel.sse_se_kernel[(kernel.cdiv(n, _BLOCK),)](
        flat, out, n, count, threshold, seed, offset % _TWO_32, offset // _TWO_32,
        0 if keep_value is None else keep_value, 0 if excluded is None else excluded,
        HAS_KEEP=keep_value is not None, HAS_EXCLUDED=excluded is not None, STREAM_TAG=_STREAM_TAG, BLOCK=_BLOCK,
    )  # fmt: skip
    return out.view(ids.shape)


def sse_se_cuda(
    kernel: Any,
    ids: torch.Tensor,
    num_embeddings: int,
    p: float,
    generator: torch.Generator | None,
    *,
    keep_value: int | None = None,
    excluded: int | None = None,
) -> torch.Tensor:
    """SSE-SE (eq. 5) of CUDA ``ids`` in one kernel launch, drawing from ``generator`` (None: the device's
    default CUDA generator). Arguments as :func:`launch_sse_se`; ``ids`` are unchecked and non-empty."""
    if generator is None:
        index = ids.device.index if ids.device.index is not None else torch.cuda.current_device()
        generator = torch.cuda.default_generators[index]
    seed, offset = philox_counter(generator)
    return launch_sse_se(kernel, ids, num_embeddings, p, seed, offset, keep_value=keep_value, excluded=excluded)

"""The fused CPU sampler kernel of SSE: built once from ``csrc/sse_sampler.cpp``, then loaded from a cache.

A mini-batch SSE call written with tensor ops pays a fixed ~3 µs per op, which on a 1024-id batch is the whole
cost (see docs/results/sse-speed.md). The C++ kernel does the same sampling in one pass. It is compiled with
``torch.utils.cpp_extension`` the first time it is needed (about a minute, needs a C++ compiler and ninja) into
``$EMBREG_KERNEL_DIR`` (default ``~/.cache/embreg/kernels``), one directory per torch version and source hash, and
loaded from there afterwards.

``EMBREG_SSE_KERNEL`` chooses the CPU backend:

* ``auto`` (default): use the kernel when it builds; otherwise warn once and use the tensor-op samplers;
* ``off``: always use the tensor-op samplers (e.g. to reproduce a stream drawn with them);
* ``on``: use the kernel and raise if it cannot be built.

Both backends draw from the same laws (eq. 3 and 5) but not the same random streams. CUDA ids always take the
tensor-op samplers.

Example:
    >>> kernel = fused_kernel()          # the compiled module, or None
    >>> backend_name() in ("cpp", "torch")
    True
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

from embreg.errors import EmbregError
from embreg.sse._validation import check_ids_range

__all__ = ["backend_name", "fused_kernel", "kernel_mode", "with_range_error"]

_SOURCE = Path(__file__).with_name("csrc") / "sse_sampler.cpp"
_MODES = ("auto", "off", "on")
_log = logging.getLogger(__name__)

_loaded: ModuleType | None = None
_failure: str | None = None


def kernel_mode() -> str:
    """The value of ``EMBREG_SSE_KERNEL`` (``auto`` when unset), checked."""
    mode = os.environ.get("EMBREG_SSE_KERNEL", "auto").strip().lower() or "auto"
    if mode not in _MODES:
        raise EmbregError(f"EMBREG_SSE_KERNEL={mode!r} is not one of {', '.join(_MODES)}")
    return mode


def fused_kernel() -> ModuleType | None:
    """The compiled kernel module, or None when the mode is ``off`` or (in ``auto``) it cannot be built.

    The build is attempted at most once per process; ``on`` raises :class:`EmbregError` with the reason.
    """
    global _loaded, _failure
    mode = kernel_mode()
    if mode == "off":
        return None
    if _loaded is None and _failure is None:
        try:
            _loaded = _build()
        except Exception as error:  # compiler missing, headers missing, ninja missing, ...
            _failure = f"{type(error).__name__}: {error}".strip()
            if mode == "auto":
                warnings.warn(
                    "embreg could not build its fused SSE CPU kernel, so SSE uses the slower tensor-op samplers "
                    f"(set EMBREG_SSE_KERNEL=off to silence this). Reason: {_failure.splitlines()[0][:300]}",
                    RuntimeWarning,
                    stacklevel=3,
                )
    if _loaded is None and mode == "on":
        raise EmbregError(f"EMBREG_SSE_KERNEL=on but the fused SSE kernel could not be built: {_failure}")
    return _loaded


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


def _kernel_dir() -> Path:
    configured = os.environ.get("EMBREG_KERNEL_DIR", "").strip()
    return Path(configured).expanduser() if configured else Path("~/.cache/embreg/kernels").expanduser()


def _build() -> ModuleType:
    from torch.utils import cpp_extension

    source = _SOURCE.read_bytes()
    flags = _compile_flags()
    tag = hashlib.sha256(source + " ".join(flags).encode() + torch.__version__.encode() + sys.version.encode())
    tag = tag.hexdigest()[:12]
    name = f"embreg_sse_sampler_{tag}"
    build_dir = _kernel_dir() / name
    build_dir.mkdir(parents=True, exist_ok=True)
    if not (build_dir / f"{name}.so").exists():
        _log.warning("embreg: compiling the fused SSE CPU kernel once into %s (about a minute)", build_dir)
    return cpp_extension.load(
        name=name,
        sources=[str(_SOURCE)],
        build_directory=str(build_dir),
        extra_cflags=["-O3", *flags],
        extra_ldflags=flags,
        verbose=False,
    )


def _compile_flags() -> list[str]:
    """OpenMP flags when torch itself runs its CPU threads with OpenMP: ``at::parallel_for`` is then an inline
    ``#pragma omp parallel`` that is compiled serially without them."""
    return ["-fopenmp"] if "parallel backend: OpenMP" in torch.__config__.parallel_info() else []

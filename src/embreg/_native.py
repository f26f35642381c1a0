"""Build-once, load-from-cache C++ CPU kernels, with a tensor-op fallback chosen by an environment variable.

A kernel is one C++ source compiled with ``torch.utils.cpp_extension`` the first time it is needed (about a
minute; needs a C++ compiler and ninja) into ``$EMBREG_KERNEL_DIR`` (default ``~/.cache/embreg/kernels``), one
directory per source, shared headers (``embreg/_csrc``), flags, torch and Python version (and CPU, for kernels
built for the host's instruction set), and loaded from there afterwards. Kernels check with ``EMBREG_CHECK`` and
every function a kernel binds is wrapped by ``EMBREG_GUARDED`` (``_csrc/embreg_errors.h``), so a failed check
reaches Python as a ``RuntimeError`` on every host. Each kernel has an environment variable that chooses the
backend:

* ``auto`` (default): use the kernel when it builds; otherwise warn once and use the tensor ops;
* ``off``: always use the tensor ops;
* ``on``: use the kernel and raise :class:`~embreg.errors.EmbregError` if it cannot be built.

Example:
    >>> kernel = NativeKernel("embreg_sse_sampler", Path("sse_sampler.cpp"), "EMBREG_SSE_KERNEL", "SSE sampler")
    >>> kernel.mode() in ("auto", "off", "on")
    True
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType

import torch

from embreg._locking import hold_lock
from embreg.errors import EmbregError

__all__ = ["NativeKernel", "SHARED_HEADERS", "kernel_dir"]

_MODES = ("auto", "off", "on")
# Headers every kernel may include (e.g. ``embreg_errors.h``); their text enters every kernel's cache key.
SHARED_HEADERS = Path(__file__).with_name("_csrc")
_log = logging.getLogger(__name__)


def kernel_dir() -> Path:
    """Where compiled kernels are cached: ``$EMBREG_KERNEL_DIR`` or ``~/.cache/embreg/kernels``."""
    configured = os.environ.get("EMBREG_KERNEL_DIR", "").strip()
    return Path(configured).expanduser() if configured else Path("~/.cache/embreg/kernels").expanduser()


def _openmp_flags() -> list[str]:
    """OpenMP flags when torch itself runs its CPU threads with OpenMP: ``at::parallel_for`` is then an inline
    ``#pragma omp parallel`` that is compiled serially without them."""
    return ["-fopenmp"] if "parallel backend: OpenMP" in torch.__config__.parallel_info() else []


def _cpu_signature() -> str:
    """The host CPU's model and feature flags (Linux ``/proc/cpuinfo``; the platform string elsewhere)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    wanted = [line for line in lines if line.split(":")[0].strip() in ("model name", "flags")]
    return "\n".join(dict.fromkeys(wanted))


class NativeKernel:
    """One C++ kernel: its source, its backend variable, and the loaded module once built.

    Args:
        name: module name prefix (the cache directory adds a hash of source, flags and versions).
        source: the ``.cpp`` file.
        env_var: the environment variable choosing ``auto``/``off``/``on``.
        what: a few words naming the kernel in warnings and errors.
        extra_flags: further compiler flags (they enter the cache key), e.g. ``-fno-math-errno`` so that loops
            calling ``sqrt`` vectorise.
        native_isa: compile for the host's instruction set (``-march=native``, with ``-fopenmp-simd`` for the
            ``omp simd`` loops); the CPU's model and flags then enter the cache key, so a cache directory shared
            by different machines never serves one machine's build to another.
    """

    def __init__(
        self,
        name: str,
        source: Path,
        env_var: str,
        what: str,
        *,
        native_isa: bool = False,
        extra_flags: tuple[str, ...] = (),
    ) -> None:
        self.name, self.source, self.env_var, self.what, self.native_isa = name, source, env_var, what, native_isa
        self.extra_flags = list(extra_flags)
        self._loaded: ModuleType | None = None
        self._failure: str | None = None

    def mode(self) -> str:
        """The value of the backend variable (``auto`` when unset), checked."""
        mode = os.environ.get(self.env_var, "auto").strip().lower() or "auto"
        if mode not in _MODES:
            raise EmbregError(f"{self.env_var}={mode!r} is not one of {', '.join(_MODES)}")
        return mode

    def load(self) -> ModuleType | None:
        """The compiled module, or None when the mode is ``off`` or (in ``auto``) it cannot be built.

        The build is attempted at most once per process; ``on`` raises :class:`EmbregError` with the reason.
        """
        mode = self.mode()
        if mode == "off":
            return None
        if self._loaded is None and self._failure is None:
            try:
                self._loaded = self._build()
            except Exception as error:  # compiler missing, headers missing, ninja missing, ...
                self._failure = f"{type(error).__name__}: {error}".strip()
                if mode == "auto":
                    warnings.warn(
                        f"embreg could not build its fused {self.what} CPU kernel, so it uses slower tensor ops "
                        f"(set {self.env_var}=off to silence this). Reason: {self._failure.splitlines()[0][:300]}",
                        RuntimeWarning,
                        stacklevel=3,
                    )
        if self._loaded is None and mode == "on":
            raise EmbregError(f"{self.env_var}=on but the fused {self.what} kernel could not be built: {self._failure}")
        return self._loaded

    def flags(self) -> list[str]:
        """Compiler flags besides ``-O3``."""
        return (["-march=native", "-fopenmp-simd"] if self.native_isa else []) + self.extra_flags + _openmp_flags()

    def _build(self) -> ModuleType:
        from torch.utils import cpp_extension

        flags = self.flags()
        key = self.source.read_bytes() + " ".join(flags).encode() + torch.__version__.encode() + sys.version.encode()
        key += b"".join(header.read_bytes() for header in sorted(SHARED_HEADERS.glob("*.h")))
        if self.native_isa:
            key += _cpu_signature().encode()
        name = f"{self.name}_{hashlib.sha256(key).hexdigest()[:12]}"
        build_dir = kernel_dir() / name
        build_dir.mkdir(parents=True, exist_ok=True)
        if not (build_dir / f"{name}.so").exists():
            _log.warning(
                "embreg: compiling the fused %s CPU kernel once into %s (about a minute)", self.what, build_dir
            )
        # One embreg process builds at a time (an flock, which dies with its process). While it is held no other
        # embreg build runs, so torch's own build baton (``lock``, an O_EXCL file that a killed build leaves
        # behind and that makes every later build wait forever) can only be stale: remove it.
        with hold_lock(build_dir.parent / f"{name}.build.lock", blocking=True):
            (build_dir / "lock").unlink(missing_ok=True)
            return cpp_extension.load(
                name=name,
                sources=[str(self.source)],
                build_directory=str(build_dir),
                extra_cflags=["-O3", *flags],
                extra_ldflags=_openmp_flags(),
                extra_include_paths=[str(SHARED_HEADERS)],
                verbose=False,
            )

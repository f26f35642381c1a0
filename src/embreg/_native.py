"""Build-once, load-from-cache C++ CPU kernels, with a tensor-op fallback chosen by an environment variable.

A kernel is one C++ source compiled with ``torch.utils.cpp_extension`` the first time it is needed (about a
minute, announced by one line on stderr; needs a C++ compiler and ninja) into ``$EMBREG_KERNEL_DIR`` (default
``$EMBREG_HOME/kernels``, so ``~/.cache/embreg/kernels`` when neither is set), one directory per source, shared headers (``embreg/_csrc``), flags, torch and Python version (and CPU, for kernels
built for the host's instruction set), and loaded from there afterwards. Kernels check with ``EMBREG_CHECK`` and
every function a kernel binds is wrapped by ``EMBREG_GUARDED`` (``_csrc/embreg_errors.h``), so a failed check
reaches Python as a ``RuntimeError`` on every host. A cache that cannot be written (a read-only mount, another
user's directory) is still used when it holds the built kernel. Each kernel has an environment variable that
chooses the backend:

* ``auto`` (default): use the kernel when it builds; otherwise warn once and use the tensor ops;
* ``off``: always use the tensor ops;
* ``on``: use the kernel and raise :class:`~embreg.errors.EmbregError` if it cannot be built.

:func:`backend_record` says which backend each kernel took in this process (a run writes it into its directory:
the SSE backends draw different random streams for one seed).

Example:
    >>> kernel = NativeKernel("embreg_sse_sampler", Path("sse_sampler.cpp"), "EMBREG_SSE_KERNEL", "SSE sampler")
    >>> kernel.mode() in ("auto", "off", "on")
    True
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.util
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType

import torch

from embreg._locking import hold_lock
from embreg.errors import EmbregError

__all__ = [
    "NativeKernel",
    "SHARED_HEADERS",
    "backend_record",
    "kernel_dir",
    "record_backend",
    "expected_backends",
    "check_backend",
    "merged_backend_record",
]

_MODES = ("auto", "off", "on")
# Headers every kernel may include (e.g. ``embreg_errors.h``); their text enters every kernel's cache key.
SHARED_HEADERS = Path(__file__).with_name("_csrc")
# What each recorded backend reports, by its key in the run record (see backend_record and record_backend).
_RECORDED: dict[str, Callable[[], str]] = {}
# The backend each kernel must take while a resumed run continues (expected_backends), by record key.
_EXPECTED: dict[str, str] = {}
# A lock file that cannot be created for these reasons means a cache this process cannot write.
_READ_ONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


def kernel_dir() -> Path:
    """Where compiled kernels are cached: ``$EMBREG_KERNEL_DIR``, else ``$EMBREG_HOME/kernels`` (the cache root
    of :func:`embreg.data.cache.embreg_home`, read here too so that this floor imports no data code), else
    ``~/.cache/embreg/kernels``. Read on every call.

    Example:
        >>> kernel_dir().name
        'kernels'
    """
    configured = os.environ.get("EMBREG_KERNEL_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    home = os.environ.get("EMBREG_HOME", "").strip()
    return (Path(home) if home else Path("~/.cache/embreg")).expanduser() / "kernels"


def backend_record() -> dict[str, str]:
    """Which backend each C++ kernel took in this process: ``{"<key>_backend": value}`` for every kernel
    constructed with a ``record_key`` (the SSE sampler, the mixed-dimension lookup, the MF step) and every
    :func:`record_backend` (the CUDA SSE sampler: ``triton`` or ``torch``).

    ``cpp``: the kernel was loaded and serves its calls; ``torch``: the tensor ops serve them (mode ``off``, or a
    build that failed in ``auto``); ``unused``: nothing asked for the kernel in this process (nothing is built
    to answer). Reading the record never builds a kernel.

    Example:
        >>> backend_record()["sse_backend"] in {"cpp", "torch", "unused"}
        True
    """
    return {f"{key}_backend": probe() for key, probe in sorted(_RECORDED.items())}


def merged_backend_record(stored: Mapping[str, str] | None) -> dict[str, str]:
    """:func:`backend_record` of this process joined with ``stored``, the record of the run's earlier sessions:
    each key lists every backend any session took (``triton+torch``), ``unused`` where none took one, so a resumed
    run's ``backends.json`` describes the whole run rather than its last session.

    Example:
        >>> merged_backend_record({"sse_backend": "cpp", "gone_backend": "torch"})["gone_backend"]
        'torch'
    """
    now = backend_record()
    merged = {}
    for key in sorted({*now, *(stored or {})}):
        values = {*(stored or {}).get(key, "unused").split("+"), *now.get(key, "unused").split("+")} - {"unused"}
        merged[key] = "+".join(sorted(values, reverse=True)) or "unused"
    return merged


def record_backend(key: str, probe: Callable[[], str]) -> None:
    """Adds ``{key}_backend: probe()`` to :func:`backend_record` (e.g. the CUDA SSE sampler, which is no C++ kernel)."""
    _RECORDED[key] = probe


@contextlib.contextmanager
def expected_backends(record: Mapping[str, str]) -> Iterator[None]:
    """While open, each kernel that ``record`` (a stored :func:`backend_record`) names with one backend must take
    that backend when it is first asked for; another one raises (:func:`check_backend`).

    A resumed run opens it with the record its directory kept: its SSE swaps continue the random streams of the
    backend that drew them, or it stops at its first draw, before any update, with an error saying how to get that
    backend back. Kernels the record lists as ``unused`` (or as several backends) are not checked.

    Example:
        >>> with expected_backends({"sse_backend": "cpp", "md_backend": "unused"}):
        ...     sorted(_EXPECTED)
        ['sse']
        >>> _EXPECTED
        {}
    """
    previous = dict(_EXPECTED)
    _EXPECTED.clear()
    _EXPECTED.update(
        {
            key.removesuffix("_backend"): value
            for key, value in record.items()
            if key.endswith("_backend") and value != "unused" and "+" not in value
        }
    )
    try:
        yield
    finally:
        _EXPECTED.clear()
        _EXPECTED.update(previous)


def check_backend(key: str, actual: str, why: str, fix: str) -> None:
    """Raises :class:`EmbregError` when a resumed run expects kernel ``key`` on another backend than ``actual``.

    Checked once per :func:`expected_backends` (a match is forgotten, so later calls cost a dict lookup).

    Args:
        key: the kernel's record key (``sse``, ``sse_cuda``, ``md``, ``mf_step``).
        actual: the backend this process takes.
        why: why it takes it (``EMBREG_SSE_KERNEL=off``, a failed build ...).
        fix: how to get the expected backend back.
    """
    expected = _EXPECTED.get(key)
    if expected is None:
        return
    if actual != expected:
        raise EmbregError(
            f"this run's {key} kernel drew with the {expected!r} backend ({key}_backend in backends.json), but this "
            f"process takes {actual!r} ({why}); the backends do not compute the same numbers (the SSE samplers "
            f"draw different random streams), so the resumed run would differ from an uninterrupted one: {fix}"
        )
    del _EXPECTED[key]


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
        record_key: the kernel's name in :func:`backend_record` (``sse`` gives ``sse_backend``), or None.
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
        record_key: str | None = None,
    ) -> None:
        self.name, self.source, self.env_var, self.what, self.native_isa = name, source, env_var, what, native_isa
        self.extra_flags = list(extra_flags)
        self._loaded: ModuleType | None = None
        self._failure: str | None = None
        self._asked_off = False
        self._record_key = record_key
        if record_key is not None:
            record_backend(record_key, self.backend)

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
            self._asked_off = True
            if self._record_key in _EXPECTED:
                self._check_expected(mode)
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
        if self._record_key in _EXPECTED:
            self._check_expected(mode)
        return self._loaded

    def _check_expected(self, mode: str) -> None:
        """:func:`check_backend` of this kernel's backend now, with the reason and the remedy in its terms."""
        if mode == "off":
            why, fix = f"{self.env_var}=off", f"unset {self.env_var} (or set it to auto)"
        elif self._loaded is not None:
            why, fix = "the kernel builds here", f"set {self.env_var}=off"
        else:
            reason = (self._failure or "").splitlines()[0][:200] if self._failure else "not built"
            why = f"the kernel could not be built: {reason}"
            fix = f"make it build here (a C++ compiler and ninja; {self.env_var}=on shows why it fails)"
        actual = "cpp" if mode != "off" and self._loaded is not None else "torch"
        check_backend(str(self._record_key), actual, why, fix)

    def backend(self) -> str:
        """``cpp``, ``torch`` or ``unused``: what served this kernel's calls in this process (see
        :func:`backend_record`); never builds."""
        try:
            mode = self.mode()
        except EmbregError:  # a bad value is reported where the kernel is asked for, not in the record
            mode = "auto"
        if mode != "off" and self._loaded is not None:
            return "cpp"
        if self._failure is not None or self._asked_off or self._loaded is not None:
            return "torch"
        return "unused"

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
        library = build_dir / f"{name}.so"
        # One embreg process builds at a time (an flock, which dies with its process). While it is held no other
        # embreg build runs, so torch's own build baton (``lock``, an O_EXCL file that a killed build leaves
        # behind and that makes every later build wait forever) can only be stale: remove it.
        with contextlib.ExitStack() as held:
            try:
                build_dir.mkdir(parents=True, exist_ok=True)
                held.enter_context(hold_lock(build_dir.parent / f"{name}.build.lock", blocking=True))
            except OSError as error:
                if error.errno not in _READ_ONLY_ERRNOS:
                    raise
                return self._load_read_only(library, error)
            (build_dir / "lock").unlink(missing_ok=True)
            if library.exists():  # built before, completely (the lock excludes a build in progress): no compiler
                return _import_library(name, library)
            print(
                f"embreg: compiling the fused {self.what} CPU kernel (once; about a minute) into {build_dir}",
                file=sys.stderr,
                flush=True,
            )
            started = time.monotonic()
            module = cpp_extension.load(
                name=name,
                sources=[str(self.source)],
                build_directory=str(build_dir),
                extra_cflags=["-O3", *flags],
                extra_ldflags=_openmp_flags(),
                extra_include_paths=[str(SHARED_HEADERS)],
                verbose=False,
            )
            print(f"embreg: compiled the {self.what} kernel in {time.monotonic() - started:.0f} s", file=sys.stderr)
            return module

    def _load_read_only(self, library: Path, error: OSError) -> ModuleType:
        """The kernel from a cache this process cannot write (no lock, no build), or an error saying what to do."""
        if library.exists():
            return _import_library(library.stem, library)
        raise EmbregError(
            f"the kernel cache {library.parent.parent} cannot be written ({error.strerror}) and holds no built "
            f"{self.what} kernel; set EMBREG_KERNEL_DIR (or EMBREG_HOME) to a writable directory, or "
            f"{self.env_var}=off"
        ) from error


def _import_library(name: str, library: Path) -> ModuleType:
    """The extension module in ``library`` (as ``cpp_extension.load`` imports it, without building anything)."""
    spec = importlib.util.spec_from_file_location(name, library)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the kernel {library}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

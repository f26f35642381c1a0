"""Allocation failures as one-line errors: a model too big for the machine is refused, not a raw traceback.

Building a model with a huge size (``model.dim=1000000000``) asks the allocator for more memory than the machine
has. PyTorch then raises a ``RuntimeError`` (``DefaultCPUAllocator: can't allocate memory: you tried to allocate N
bytes``), a ``torch.OutOfMemoryError`` on a GPU, a ``MemoryError``, or, for sizes beyond 64-bit arithmetic, a size
overflow. :func:`allocation_failure` recognises these and :func:`refuse_allocation_failure` turns them into a
:class:`~embreg.errors.ConfigError` that names what was built and how much memory it asked for.

Example:
    >>> try:
    ...     with refuse_allocation_failure("model 'mf' (dim=1000000000)"):
    ...         raise RuntimeError("can't allocate memory: you tried to allocate 3772000000000 bytes")
    ... except ConfigError as error:
    ...     print(error)
    model 'mf' (dim=1000000000) does not fit in memory: it asked for 3.4 TiB (3772000000000 bytes). Choose ...
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from embreg.errors import ConfigError

__all__ = ["allocation_failure", "refuse_allocation_failure", "format_bytes"]

# Messages of PyTorch's allocators (CPU and CUDA) and of its size arithmetic when a tensor is too big to exist.
_ALLOCATION_MESSAGES = (
    "can't allocate memory",
    "out of memory",
    "storage size calculation overflowed",
    "overflow when unpacking long",
)
_CPU_BYTES = re.compile(r"allocate (\d+) bytes")
_GPU_BYTES = re.compile(r"[Tt]ried to allocate ([\d.]+ [KMGTP]?i?B)")


def format_bytes(count: int) -> str:
    """A byte count in binary units, e.g. ``3.4 TiB``.

    Example:
        >>> format_bytes(3772000000000), format_bytes(512)
        ('3.4 TiB', '512 B')
    """
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def allocation_failure(error: BaseException) -> str | None:
    """How much memory a failed allocation asked for (``"3.4 TiB (3772000000000 bytes)"``, ``"more than 64-bit
    sizes can hold"``, ``"more than was free"``), or ``None`` when ``error`` is not an allocation failure.

    Example:
        >>> allocation_failure(MemoryError()), allocation_failure(ValueError("bad value"))
        ('more than was free', None)
    """
    if isinstance(error, MemoryError):
        return "more than was free"
    if not isinstance(error, (RuntimeError, TypeError)):
        return None
    text = str(error)
    lowered = text.lower()
    if not any(message in lowered for message in _ALLOCATION_MESSAGES):
        return None
    if "overflow" in lowered:
        return "more than 64-bit sizes can hold"
    found = _CPU_BYTES.search(text)
    if found:
        count = int(found.group(1))
        return f"{format_bytes(count)} ({count} bytes)"
    found = _GPU_BYTES.search(text)
    return found.group(1) if found else "more than was free"


@contextlib.contextmanager
def refuse_allocation_failure(what: str, hint: str = "Choose smaller sizes (e.g. model.dim)") -> Iterator[None]:
    """Re-raises an allocation failure inside the block as a one-line :class:`~embreg.errors.ConfigError`.

    Args:
        what: what the block builds, e.g. ``"model 'mf' (dim=1000000000)"``.
        hint: what to change, first part of the error's last sentence.

    Raises:
        ConfigError: the block's allocation failed (the message names ``what`` and the bytes asked for); any other
            exception passes unchanged.
    """
    try:
        yield
    except (MemoryError, RuntimeError, TypeError) as error:
        size = allocation_failure(error)
        if size is None:
            raise
        raise ConfigError(
            f"{what} does not fit in memory: it asked for {size}. {hint} or a machine with more memory"
        ) from error

"""Atomic file writes and checkpoint save/load.

Every write goes to a temporary file in the target's directory, is flushed and ``fsync``-ed, and then
replaces the target with ``os.replace`` (atomic on POSIX and Windows). A crash or an exception at any point
leaves either the old file or the new one, never a half-written target, and the temporary file is removed.

Example:
    >>> import tempfile, pathlib, torch
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = pathlib.Path(d) / "best.pt"
    ...     _ = save_checkpoint(path, {"epoch": 3, "weight": torch.ones(2)})
    ...     load_checkpoint(path)["epoch"]
    3
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch

from embreg.errors import DataError

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_json", "save_checkpoint", "load_checkpoint"]


def _current_umask() -> int:
    """The process umask; read from /proc on Linux, else by setting and restoring it (once, at import)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_current_umask()


def _fsync_directory(directory: Path) -> None:
    """Persist the rename itself (POSIX); a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], None]) -> Path:
    """Call ``write(file)`` on a temporary file beside ``path``, then move it onto ``path`` atomically."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, _FILE_MODE)  # mkstemp creates 0600 files; give the usual permissions
        os.replace(temp, target)
    except BaseException:
        # BaseException as well: a KeyboardInterrupt mid-write must not leave the temporary file behind.
        temp.unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)
    return target


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, creating parent directories.

    Args:
        path: the target file; replaced if it exists.
        data: the bytes to write.

    Returns:
        The target path.

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     atomic_write_bytes(pathlib.Path(d) / "x.bin", b"abc").read_bytes()
        b'abc'
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    return _atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (no newline translation).

    Args:
        path: the target file; replaced if it exists.
        text: the text to write.
        encoding: text encoding.

    Returns:
        The target path.

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     atomic_write_text(pathlib.Path(d) / "report.md", "# run\\n").read_text()
        '# run\\n'
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    return atomic_write_bytes(path, text.encode(encoding))


def _json_default(value: Any) -> Any:
    """Encode the values metrics and configs commonly hold: paths, numpy scalars, one-element tensors."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        return value.item()  # numpy scalar
    if hasattr(value, "tolist") and hasattr(value, "dtype"):
        return value.tolist()  # numpy array or tensor
    raise TypeError(f"object of type {type(value).__name__} is not JSON serialisable: {value!r}")


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as JSON (indent 2, sorted keys, trailing newline) atomically.

    Paths become strings and numpy scalars, arrays and tensors become numbers and lists. NaN and infinity
    are written as ``NaN``/``Infinity``, which Python's ``json`` reads back (strict JSON parsers do not).

    Args:
        path: the target file; replaced if it exists.
        obj: JSON-serialisable data.

    Returns:
        The target path.

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     print(atomic_write_json(pathlib.Path(d) / "m.json", {"rmse": 0.9, "mae": 0.7}).read_text(), end="")
        {
          "mae": 0.7,
          "rmse": 0.9
        }
    """
    text = json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n"
    return atomic_write_text(path, text)


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> Path:
    """Save a training state with ``torch.save``, atomically.

    If saving fails or is interrupted, the previous checkpoint at ``path`` is left untouched.

    Args:
        path: the checkpoint file, e.g. ``run_dir / "best.pt"``.
        state: a dict, e.g. ``{"model": model.state_dict(), "optimizer": ..., "epoch": 3}``.

    Returns:
        The checkpoint path.

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     save_checkpoint(pathlib.Path(d) / "last.pt", {"epoch": 1}).name
        'last.pt'
    """
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict, got {type(state).__name__}")
    return _atomic_write(path, lambda handle: torch.save(state, handle))


def load_checkpoint(path: str | os.PathLike[str], map_location: Any = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint`.

    This calls ``torch.load(..., weights_only=False)`` because our checkpoints hold plain Python objects
    (configs, RNG states, history) besides tensors. Unpickling can run arbitrary code, so only load files
    that embreg itself wrote; never a checkpoint from an untrusted source.

    Args:
        path: the checkpoint file.
        map_location: where to put tensors, as for ``torch.load`` (default ``"cpu"``).

    Returns:
        The saved state dict.

    Raises:
        DataError: the file does not exist, is not a file, cannot be unpickled (truncated or corrupt), or does
            not hold a dict.

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = save_checkpoint(pathlib.Path(d) / "best.pt", {"step": 7})
        ...     load_checkpoint(p)
        {'step': 7}
    """
    target = Path(path)
    if not target.exists():
        raise DataError(f"checkpoint not found: {str(target)!r}")
    if not target.is_file():
        raise DataError(f"checkpoint path {str(target)!r} is not a file")
    try:
        state = torch.load(target, map_location=map_location, weights_only=False)
    except Exception as exc:
        raise DataError(
            f"checkpoint {str(target)!r} is corrupt or not a torch checkpoint ({type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(state, dict):
        raise DataError(f"checkpoint {str(target)!r} holds {type(state).__name__}, expected a dict of training state")
    return state

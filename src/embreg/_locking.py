"""Exclusive lock files (``fcntl.flock``) that die with their process, shared by every writer that needs one.

A lock is an open file description holding ``flock(LOCK_EX)`` on ``path``; the kernel drops it when the process
exits, however it exits, so a crash never leaves a stale lock behind. The holder writes its pid into the file (for
the refusal message) and removes the file on release. Because a waiter may have opened the file just before the
previous holder removed it, a lock counts only once the locked file is still the one at ``path`` (same inode).

Used by the study runner's log (:func:`embreg.studies.runner.lock_log`), run directories
(:meth:`embreg.runs.run_dir.RunDirectory.lock`) and dataset fetches (:mod:`embreg.data.registry`).

Example:
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = pathlib.Path(d) / "demo.lock"
    ...     with hold_lock(path, refused=lambda pid: RuntimeError(f"held by {pid}")):
    ...         try:
    ...             with hold_lock(path, refused=lambda pid: RuntimeError("held")):
    ...                 pass
    ...         except RuntimeError as error:
    ...             print(error)
    ...     path.exists()
    held
    False
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["hold_lock"]


@contextlib.contextmanager
def hold_lock(
    path: str | Path, *, refused: Callable[[str], Exception] | None = None, blocking: bool = False
) -> Iterator[Path]:
    """Holds ``path`` exclusively for the ``with`` block (creating its directory and the file).

    Args:
        path: the lock file.
        refused: builds the error raised when another holder has the lock (given the holder's pid as written in
            the file, or ``""``); only without ``blocking``.
        blocking: wait for the lock instead of refusing.

    Raises:
        Exception: ``refused(pid)`` when the lock is taken and ``blocking`` is false.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip()
            os.close(fd)
            raise (refused or _default_refusal(path))(holder) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            current: int | None = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            break
        os.close(fd)  # the previous holder removed the file between our open and our lock: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


def _default_refusal(path: Path) -> Callable[[str], Exception]:
    def refusal(holder: str) -> Exception:
        pid = f" (pid {holder})" if holder else ""
        return BlockingIOError(f"{path} is locked by another process{pid}")

    return refusal

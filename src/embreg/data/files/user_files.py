"""A user's own data file: checked to be a regular file, and described by what a run records of it.

Every reader of a user's file (:func:`~embreg.data.files.ratings_file.load_ratings_file`,
:func:`~embreg.data.files.ctr_file.load_ctr_file`, :func:`~embreg.data.files.text_file.load_text_file`) starts with
:func:`check_regular_file`, so a directory, a device or a FIFO given as the file is named for what it is rather
than reported missing. :func:`describe_file` is what a run directory keeps of the file (``split.json``, the
report): its path as resolved, its size and its sha256, so a result can be traced to the exact bytes it came from.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "r.csv"
    ...     _ = path.write_text("user_id,item_id\\n1,2\\n")
    ...     record = describe_file(path)
    >>> record["bytes"], record["sha256"][:12]
    (20, '7b2b4f3c7458')
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from embreg.data.cache import sha256_file
from embreg.errors import DataError

__all__ = ["check_regular_file", "describe_file", "resolved_path", "not_utf8_error", "FLOAT32_MAX"]

FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32: a value beyond it would become ``inf`` in the tensors a model trains on."""

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def resolved_path(path: str | Path) -> Path:
    """``path`` with ``~`` expanded and made absolute (links resolved), as runs record it.

    Example:
        >>> resolved_path("/tmp/../tmp/x.csv").as_posix()
        '/tmp/x.csv'
    """
    return Path(path).expanduser().resolve()


def check_regular_file(path: str | Path, what: str) -> Path:
    """``path`` as a :class:`Path` when it is an existing regular file (or a link to one).

    Args:
        path: the file.
        what: what the file holds, for the message (``"ratings file"``).

    Raises:
        DataError: ``path`` does not exist, or is a directory, a device, a FIFO or a socket (named as such).

    Example:
        >>> check_regular_file("/tmp", "ratings file")
        Traceback (most recent call last):
        ...
        embreg.errors.DataError: ratings file /tmp is not a regular file (it is a directory)
    """
    file = Path(path)
    try:
        mode = file.stat().st_mode
    except FileNotFoundError:
        raise DataError(f"{what} {file} does not exist") from None
    except OSError as exc:
        raise DataError(f"{what} {file} cannot be opened: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a plain file")
        raise DataError(f"{what} {file} is not a regular file (it is {kind})")
    return file


def describe_file(path: str | Path) -> dict[str, Any]:
    """``{"path": resolved path, "bytes": size, "sha256": hex digest}`` of a regular file.

    Raises:
        DataError: as :func:`check_regular_file`.
    """
    file = check_regular_file(path, "data file")
    return {"path": str(resolved_path(file)), "bytes": file.stat().st_size, "sha256": sha256_file(file)}


def not_utf8_error(data: bytes, name: str) -> DataError:
    """The error for ``data`` (read from ``name``) that is not UTF-8 text, naming the line and the byte where the
    decoding stops (counted from the file's start, after a UTF-8 byte order mark).

    Example:
        >>> print(not_utf8_error(b"user,item\\n1,\\xff\\n", "r.csv"))
        r.csv: line 2 is not UTF-8 text (byte 0xff); save the file as UTF-8
    """
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        line = data.count(b"\n", 0, start) + 1
        return DataError(f"{name}: line {line} is not UTF-8 text (byte {data[start]:#04x}); save the file as UTF-8")
    return DataError(f"{name} is not UTF-8 text; save the file as UTF-8")

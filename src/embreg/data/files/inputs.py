"""What a user hands a trained run: lists of items, and text files of one item per line.

Lists. ``translate``, ``score``, ``predict`` on texts and ``recommend`` (``users``, ``history``) take several items
at once, and a single ``str`` given there is refused with the fix (:func:`item_list`): a string is a sequence of
characters, and taking it as one would translate, score or recommend each character. The one rule for every such
argument: pass a list, even of one item (``run.translate(["Der Vater liest"])``). (``predict`` takes a ``str`` as
the path of an input file; a text to predict on goes in a list too.)

Lines. A text file holds one item per line, and lines end at ``\\n`` or ``\\r\\n`` only (:func:`split_lines`):
form feeds, U+2028 / U+2029, U+0085 and the other characters Python's ``str.splitlines`` also breaks at stay inside
their line, so the N-th output always answers the N-th input line. Files are read as UTF-8 (a byte order mark
first is dropped); bytes that are not UTF-8 are a :class:`~embreg.errors.DataError` naming the file and the line.

Example:
    >>> split_lines("a\\x0cb\\r\\nc\\u2028d\\n")
    ['a\\x0cb', 'c\\u2028d']
    >>> item_list(["Der Vater liest"], argument="lines", call="translate")
    ['Der Vater liest']
    >>> item_list("Der Vater liest", argument="lines", call="translate")
    Traceback (most recent call last):
    ...
    embreg.errors.ConfigError: translate(lines=...) takes a list, not a single str: pass ['Der Vater liest']
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from embreg.data.files.user_files import not_utf8_error
from embreg.errors import ConfigError, DataError

__all__ = ["item_list", "split_lines", "decode_lines", "read_lines", "read_stdin_lines"]

_SHOWN = 40  # characters of a refused string quoted in the error


def item_list(value: Any, *, argument: str, call: str) -> list[Any]:
    """The items of ``value`` as a list: any iterable of items except a ``str`` or ``bytes`` (one string would be
    taken character by character); a single non-iterable value (``recommend(users=196)``) is refused too.

    Args:
        value: what the user passed.
        argument: the parameter's name, e.g. ``"lines"``.
        call: the method, e.g. ``"translate"`` (the error reads ``translate(lines=...)``).

    Raises:
        ConfigError: a ``str``, ``bytes`` or non-iterable value, naming the list that works.
    """
    if isinstance(value, str | bytes):
        kind, text = ("str", str(value)) if isinstance(value, str) else ("bytes", value.decode("utf-8", "replace"))
        shown = text if len(text) <= _SHOWN else text[:_SHOWN] + "..."
        raise ConfigError(f"{call}({argument}=...) takes a list, not a single {kind}: pass [{shown!r}]")
    if not isinstance(value, Iterable):
        raise ConfigError(f"{call}({argument}=...) takes a list, not a single {type(value).__name__}: pass [{value!r}]")
    return list(value)


def split_lines(text: str) -> list[str]:
    """The lines of ``text``: split at ``\\n``, a ``\\r`` before it dropped; a final line break ends the last line
    (it does not start an empty one). Every other character stays in its line.

    Example:
        >>> split_lines("one\\x1ctwo\\x85\\nthree"), split_lines(""), split_lines("\\n")
        (['one\\x1ctwo\\x85', 'three'], [], [''])
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def decode_lines(data: bytes, name: str) -> list[str]:
    """The lines (:func:`split_lines`) of UTF-8 ``data`` read from ``name`` (a leading byte order mark dropped).

    Raises:
        DataError: bytes that are not UTF-8, naming ``name``, the line and the byte.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise not_utf8_error(data, name) from None
    return split_lines(text)


def read_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file (:func:`decode_lines`).

    Raises:
        DataError: a missing file, or one that is not UTF-8 (naming the line).
    """
    file = Path(path)
    if not file.is_file():
        raise DataError(f"input file {str(file)!r} does not exist")
    return decode_lines(file.read_bytes(), str(file))


def read_stdin_lines() -> list[str]:
    """The lines of standard input, read as :func:`decode_lines` reads a file (named ``<stdin>`` in errors)."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream without bytes underneath (e.g. io.StringIO)
        return split_lines(sys.stdin.read())
    return decode_lines(buffer.read(), "<stdin>")

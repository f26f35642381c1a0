"""Read chosen columns of a delimited text file or a parquet file, remembering where each row came from.

Text files are read with :mod:`csv` rather than pandas so that every problem can
be reported at its exact 1-based line (the header is line 1) and ragged rows are
caught rather than padded. Column names may be given plainly (``user_id``) even
when the header is in RecBole's typed form (``user_id:token``).
"""

from __future__ import annotations

import csv
import difflib
import gzip
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from embreg.data.files.user_files import not_utf8_error
from embreg.errors import DataError

PARQUET_SUFFIXES = (".parquet", ".pq")
_SEPARATOR_BY_SUFFIX = {".csv": ",", ".tsv": "\t"}
_SNIFF_CANDIDATES = ("\t", ",", ";", "|")
_SNIFF_LINES = 20


@dataclass
class Table:
    """Columns read from a file, with a way to name a row's position in messages.

    Attributes:
        path: the file.
        names: resolved header name of each wanted column, in the order asked for.
        columns: ``{header name: pandas Series}`` (strings for text files, native dtypes for parquet).
        lines: for text files, (N,) 1-based line number of each row; None for parquet.
    """

    path: Path
    names: list[str]
    columns: dict[str, pd.Series]
    lines: np.ndarray | None

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def where(self, row: int) -> str:
        """``"line 7"`` (text, counting the header as line 1) or ``"row 6"`` (parquet, 1-based)."""
        if self.lines is not None:
            return f"line {int(self.lines[row])}"
        return f"row {row + 1}"


def _base_suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def _open_text(path: Path) -> IO[str]:
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def _raw_bytes(path: Path) -> bytes:
    """The bytes :func:`_open_text` decodes (a ``.gz`` file's decompressed)."""
    return gzip.decompress(path.read_bytes()) if path.suffix.lower() == ".gz" else path.read_bytes()


def resolve_column(requested: str, header: Sequence[str], role: str, path: Path) -> str:
    """The header name matching ``requested`` exactly, or by its name part (``user_id`` ~ ``user_id:token``).

    Raises:
        DataError: no such column; the message lists the columns present and the closest match.
    """
    if requested in header:
        return requested
    typed = [name for name in header if name.split(":", 1)[0] == requested]
    if len(typed) == 1:
        return typed[0]
    close = difflib.get_close_matches(requested, list(header), n=1, cutoff=0.3)
    hint = f"closest match: {close[0]!r}" if close else "no close match"
    raise DataError(f"{path}: no column {requested!r} for the {role}; columns present: {list(header)}; {hint}")


def detect_separator(path: Path) -> str:
    """The field separator of a text file: from the extension (.csv, .tsv), else sniffed.

    Sniffing picks, among tab, comma, semicolon and bar, the one that occurs the same
    number of times (at least once) on each of the first 20 non-blank lines, preferring
    that order on ties; a file where none does is an error asking for ``sep=``.
    """
    by_suffix = _SEPARATOR_BY_SUFFIX.get(_base_suffix(path))
    if by_suffix is not None:
        return by_suffix
    sample: list[str] = []
    with _open_text(path) as handle:
        for line in handle:
            if line.strip():
                sample.append(line.rstrip("\r\n"))
            if len(sample) >= _SNIFF_LINES:
                break
    if not sample:
        raise DataError(f"{path} is empty")
    for candidate in _SNIFF_CANDIDATES:
        counts = {line.count(candidate) for line in sample}
        if len(counts) == 1 and counts.pop() > 0:
            return candidate
    raise DataError(f"{path}: cannot detect the field separator (tried tab, ',', ';', '|'); pass sep=")


def read_text_table(path: Path, wanted: Sequence[tuple[str, str]], sep: str, *, quoted: bool = True) -> Table:
    """Read the ``wanted`` columns of a delimited text file as strings.

    Args:
        path: the file (``.gz`` is decompressed).
        wanted: ``(column name, role)`` pairs; the role names the column in messages.
        sep: a single-character field separator.
        quoted: honour CSV double quotes; False for formats without quoting
            (RecBole atomic files), where a ``"`` is an ordinary character.

    Raises:
        DataError: empty file, no data rows, a missing column, a ragged row or undecodable text.
    """
    if len(sep) != 1:
        raise DataError(f"sep={sep!r} must be a single character")
    try:
        with _open_text(path) as handle:
            reader = csv.reader(handle, delimiter=sep, quoting=csv.QUOTE_MINIMAL if quoted else csv.QUOTE_NONE)
            header = _first_record(reader)
            if header is None:
                raise DataError(f"{path} is empty")
            header = [name.strip() for name in header]
            names = [resolve_column(name, header, role, path) for name, role in wanted]
            positions = [header.index(name) for name in names]
            values: list[list[str]] = [[] for _ in names]
            lines: list[int] = []
            for record in reader:
                if not record or (len(record) == 1 and not record[0].strip()):
                    continue
                if len(record) != len(header):
                    raise DataError(
                        f"{path}: line {reader.line_num} has {len(record)} fields but the header "
                        f"(line 1) has {len(header)}: {header}"
                    )
                for column, position in zip(values, positions):
                    column.append(record[position])
                lines.append(reader.line_num)
    except UnicodeDecodeError:
        raise not_utf8_error(_raw_bytes(path), str(path)) from None
    except csv.Error as exc:
        raise DataError(f"{path}: malformed text ({exc})") from exc
    if not lines:
        raise DataError(f"{path} has a header but no data rows")
    columns = {name: pd.Series(column, dtype=object) for name, column in zip(names, values)}
    return Table(path, names, columns, np.asarray(lines, dtype=np.int64))


def _first_record(reader: Iterator[list[str]]) -> list[str] | None:
    for record in reader:
        if record and any(field.strip() for field in record):
            return record
    return None


def read_parquet_table(path: Path, wanted: Sequence[tuple[str, str]]) -> Table:
    """Read the ``wanted`` columns of a parquet file with their native dtypes.

    Raises:
        DataError: unreadable file, a missing column or no rows.
    """
    import pyarrow.parquet as pq

    try:
        header = list(pq.read_schema(path).names)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise DataError(f"{path} is not a readable parquet file: {exc}") from exc
    names = [resolve_column(name, header, role, path) for name, role in wanted]
    frame = pd.read_parquet(path, columns=list(dict.fromkeys(names)))
    if len(frame) == 0:
        raise DataError(f"{path} has no rows")
    return Table(path, names, {name: frame[name].reset_index(drop=True) for name in names}, None)

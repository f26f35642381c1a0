"""Load a user's own click table (CSV, TSV, other delimited text, or parquet) into :class:`CTRData`.

The file holds one example per row: a 0/1 label column, any number of dense (numeric) columns and at least one
categorical column. Text files are read with the project's table reader
(:func:`embreg.data.files.tables.read_text_table`, the one :func:`embreg.data.files.ratings_file.load_ratings_file` and
:func:`embreg.data.files.text_file.load_text_file` use), so every problem names the file, the file line (the header is
line 1) and the column; parquet files keep their native dtypes and problems name the 1-based data row. Every bad
input raises :class:`~embreg.errors.DataError`.

Decisions:

* Labels must be 0 or 1: integers, floats equal to 0/1 (``1.0``), booleans (parquet), or the words ``true`` and
  ``false`` (any case). Other words (``yes``/``no``, ``click``, ...) are rejected rather than guessed. A missing
  or empty label is an error.
* Dense columns must hold finite numbers; an empty, NaN, infinite or non-numeric value is an error naming the
  line/row and the column. Values are kept raw (the CTR task standardises them with training statistics).
* Categorical values are arbitrary strings, taken literally after stripping surrounding whitespace (``"NA"`` is
  the string ``NA``). A missing value (an empty text cell, or a null in parquet) is *not* an error: it becomes its
  own value ``""`` (in click logs such as Criteo an absent field is informative). Parquet values are compared by
  their string form (``str(value)``). Each field is numbered by its sorted distinct values
  (:func:`embreg.data.ctr.encode_field`).
* ``categorical_cols=None`` takes every column except the label and the dense columns, in file order (parquet
  index columns ``__index_level_N__`` are skipped).

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "clicks.csv"
    ...     _ = path.write_text("label,site,device,price\\n1,news,ios,0.5\\n0,shop,,2.0\\n0,news,android,1.5\\n")
    ...     data = load_ctr_file(path, dense_cols=["price"])
    >>> data.name, len(data), data.field_names, data.cardinalities, data.dense_names
    ('file-clicks', 3, ('site', 'device'), (2, 3), ('price',))
    >>> data.categorical.tolist(), data.labels.tolist()
    ([[0, 2], [1, 0], [0, 1]], [1.0, 0.0, 0.0])
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from embreg.data.ctr import CTRData, encode_field
from embreg.data.files.ratings_file import _fail, _first, _nonempty_text, parse_numbers
from embreg.data.files.tables import (
    PARQUET_SUFFIXES,
    Table,
    _first_record,
    _open_text,
    _raw_bytes,
    detect_separator,
    read_parquet_table,
    read_text_table,
    resolve_column,
)
from embreg.data.files.user_files import check_regular_file, not_utf8_error
from embreg.errors import DataError

__all__ = ["load_ctr_file"]

_TRUE_WORDS = frozenset({"true"})
_FALSE_WORDS = frozenset({"false"})
_LABEL_HINT = "labels must be 0 or 1 (or true/false)"


def _header(path: Path, sep: str | None) -> tuple[list[str], str | None]:
    """The column names of ``path`` and the separator to read it with (None for parquet)."""
    if path.suffix.lower() in PARQUET_SUFFIXES:
        if path.stat().st_size == 0:
            raise DataError(f"{path} is empty")
        import pyarrow.parquet as pq

        try:
            names = list(pq.read_schema(path).names)
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise DataError(f"{path} is not a readable parquet file: {exc}") from exc
        return [n for n in names if not (n.startswith("__index_level_") and n.endswith("__"))], None
    if sep is None:
        sep = detect_separator(path)
    if len(sep) != 1:
        raise DataError(f"sep={sep!r} must be a single character")
    try:
        with _open_text(path) as handle:
            header = _first_record(csv.reader(handle, delimiter=sep))
    except UnicodeDecodeError:
        raise not_utf8_error(_raw_bytes(path), str(path)) from None
    except csv.Error as exc:
        raise DataError(f"{path}: malformed text ({exc})") from exc
    if header is None:
        raise DataError(f"{path} is empty")
    return [name.strip() for name in header], sep


def _read(path: Path, wanted: list[tuple[str, str]], sep: str | None) -> Table:
    try:
        if sep is None:
            return read_parquet_table(path, wanted)
        return read_text_table(path, wanted, sep)
    except DataError:
        raise
    except Exception as exc:  # a damaged .gz or parquet file
        raise DataError(f"{path} cannot be read: {exc}") from exc


def _labels(table: Table, column: str) -> np.ndarray:
    """``column`` as float32 0/1 labels (see the module docstring for what is accepted)."""
    raw = table.columns[column]
    missing = raw.isna().to_numpy()
    if missing.any():
        raise _fail(table, _first(missing), column, "missing label (null)")
    if pd.api.types.is_bool_dtype(raw.dtype):
        return raw.to_numpy(dtype=bool).astype(np.float32)
    if pd.api.types.is_numeric_dtype(raw.dtype):
        values = raw.to_numpy(dtype=np.float64)
        shown = raw.tolist()
    else:
        text = _nonempty_text(table, column, "label")
        lower = text.str.lower()
        values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        values = np.where(lower.isin(_TRUE_WORDS), 1.0, np.where(lower.isin(_FALSE_WORDS), 0.0, values))
        shown = text.tolist()
    bad = ~np.isin(values, (0.0, 1.0))
    if bad.any():
        i = _first(bad)
        raise _fail(table, i, column, f"label {shown[i]!r} is not binary; {_LABEL_HINT}")
    return values.astype(np.float32)


def _categories(table: Table, column: str) -> np.ndarray:
    """``column`` as stripped strings; a missing value becomes ``""``."""
    raw = table.columns[column]
    missing = raw.isna().to_numpy()
    text = raw.astype(object).where(~missing, "").map(str).str.strip()
    return text.to_numpy(dtype=object)


def load_ctr_file(
    path: str | Path,
    *,
    label_col: str = "label",
    categorical_cols: Sequence[str] | None = None,
    dense_cols: Sequence[str] = (),
    sep: str | None = None,
) -> CTRData:
    """Read a click table from a delimited text file or a parquet file.

    The format comes from the extension: ``.parquet``/``.pq`` are parquet, ``.csv`` is comma-separated, ``.tsv``
    tab-separated, anything else (``.txt``, ...) is sniffed (:func:`embreg.data.files.tables.detect_separator`) unless
    ``sep`` is given; ``.gz`` text is decompressed. Text files need a header row and may quote fields CSV-style.
    Column names may be given plainly even when the header is in RecBole's typed form (``site:token``).

    Args:
        path: the file.
        label_col: column of 0/1 labels (``true``/``false`` are accepted too).
        categorical_cols: the categorical fields, in this order; None for every column that is neither the label
            nor dense (in file order).
        dense_cols: numeric columns (no missing values).
        sep: field separator of a text file; None to take it from the extension or sniff it.

    Returns:
        :class:`CTRData` named ``file-<stem>``: one field per categorical column (values numbered by sorted
        string, a missing value being the value ``""``), the raw dense columns as float32 and the labels.

    Raises:
        DataError: missing, empty, unreadable or ragged file, or a path that is not a regular file (a directory,
            device or FIFO); a missing column (listing the columns present and
            the closest match); a column named twice or in two roles; no categorical column; a missing or
            non-binary label; a missing, non-numeric, infinite or float32-overflowing dense value. Messages name the file, the line
            (text, header = line 1) or the 1-based row (parquet), and the column.
    """
    file = check_regular_file(path, "click file")
    header, sep = _header(file, sep)
    label_name = resolve_column(label_col, header, "label", file)
    dense_names = [resolve_column(name, header, "dense feature", file) for name in dense_cols]
    if categorical_cols is None:
        taken = {label_name, *dense_names}
        categorical_names = [name for name in header if name not in taken]
    else:
        categorical_names = [resolve_column(name, header, "categorical field", file) for name in categorical_cols]
    roles: dict[str, str] = {}
    for name, role in [
        (label_name, "label"),
        *((n, "dense") for n in dense_names),
        *((n, "categorical") for n in categorical_names),
    ]:
        if name in roles:
            where = "twice" if roles[name] == role else f"as {roles[name]} and as {role}"
            raise DataError(f"{file}: column {name!r} is used {where}; every column may have one role")
        roles[name] = role
    if not categorical_names:
        raise DataError(
            f"{file}: no categorical column (columns present: {header}; label {label_name!r}, dense "
            f"{dense_names}); a click table needs at least one categorical field"
        )
    wanted = [
        (label_name, "label"),
        *((n, "dense feature") for n in dense_names),
        *((n, "categorical field") for n in categorical_names),
    ]
    table = _read(file, wanted, sep)
    labels = _labels(table, label_name)
    num_rows = len(labels)
    dense = np.empty((num_rows, len(dense_names)), dtype=np.float32)
    for j, name in enumerate(dense_names):
        dense[:, j] = parse_numbers(table, name, "dense value")
    codes, cardinalities = [], []
    for name in categorical_names:
        field_codes, vocabulary = encode_field(_categories(table, name))
        codes.append(field_codes)
        cardinalities.append(len(vocabulary))
    return CTRData(
        f"file-{file.stem}",
        np.stack(codes, axis=1),
        tuple(categorical_names),
        tuple(cardinalities),
        dense,
        tuple(dense_names),
        labels,
    )

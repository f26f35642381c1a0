"""Load a user's own interactions file (CSV, TSV, other delimited text, or parquet) into :class:`RatingsData`.

Every problem is a :class:`DataError` naming the file, the position (``line N``
for text, counting the header as line 1; ``row N`` for parquet, 1-based) and the
column. Ratings must fit float32 (the tensors a model trains on), timestamps int64.
Duplicate interactions are refused unless a policy resolves them
(:mod:`embreg.data.files.duplicates`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from embreg.data.files.duplicates import check_duplicate_policy, resolve_duplicates
from embreg.data.files.tables import PARQUET_SUFFIXES, Table, detect_separator, read_parquet_table, read_text_table
from embreg.data.files.user_files import FLOAT32_MAX, check_regular_file
from embreg.data.ratings import RatingsData
from embreg.errors import DataError

_INT64_LIMIT = 2.0**63

_MISSING_WORDS = frozenset({"nan", "na", "n/a", "null", "none"})
_CANONICAL_INT = r"-?(?:0|[1-9]\d{0,17})"


def _fail(table: Table, row: int, column: str, problem: str) -> DataError:
    return DataError(f"{table.path}: {table.where(row)}, column {column!r}: {problem}")


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def parse_labels(table: Table, column: str, role: str) -> np.ndarray:
    """Ids of ``column`` as int64 (when every value is a canonical integer) or as strings.

    Integers are kept as integers only when writing them back gives the same text,
    so ``"007"`` and ``"7"`` stay distinct labels.
    """
    raw = table.columns[column]
    if pd.api.types.is_bool_dtype(raw.dtype):
        return raw.astype(str).to_numpy(dtype=object)
    if pd.api.types.is_integer_dtype(raw.dtype) and not raw.isna().any():
        return raw.to_numpy(dtype=np.int64)
    if pd.api.types.is_numeric_dtype(raw.dtype):
        values = raw.to_numpy(dtype=np.float64, na_value=np.nan)
        if np.isnan(values).any():
            raise _fail(table, _first(np.isnan(values)), column, f"missing {role} (NaN)")
        fractional = values != np.floor(values)
        if fractional.any():
            i = _first(fractional)
            raise _fail(table, i, column, f"{role} {values[i]!r} is neither an integer nor a string label")
        return values.astype(np.int64)
    text = _nonempty_text(table, column, role)
    nan_like = text.str.lower().isin(_MISSING_WORDS).to_numpy()
    if nan_like.any():
        i = _first(nan_like)
        raise _fail(table, i, column, f"missing {role} ({text.iloc[i]!r})")
    if text.str.fullmatch(_CANONICAL_INT).all():
        return text.astype(np.int64).to_numpy()
    return text.to_numpy(dtype=object)


def _nonempty_text(table: Table, column: str, role: str) -> pd.Series:
    """``column`` as stripped strings; a null or empty cell is an error naming its line/row."""
    raw = table.columns[column]
    missing = raw.isna().to_numpy()
    if missing.any():
        raise _fail(table, _first(missing), column, f"missing {role} (null)")
    text = raw.astype(str).str.strip()
    empty = (text == "").to_numpy()
    if empty.any():
        raise _fail(table, _first(empty), column, f"empty {role}")
    return text


def parse_numbers(table: Table, column: str, role: str, *, limit: float | None = FLOAT32_MAX) -> np.ndarray:
    """Finite float64 values of ``column``; empty, NaN, infinite or non-numeric values are errors.

    Args:
        table, column: where the values are.
        role: what they are, for messages (``"rating"``).
        limit: the largest magnitude allowed (default: float32's, since the values become float32 tensors;
            ``2**63`` for int64 timestamps; None: any finite value).

    Raises:
        DataError: naming the file, line (or parquet row) and column of the first bad value; a value beyond
            ``limit`` is refused rather than turned into ``inf`` (or a wrapped integer) later.
    """
    raw = table.columns[column]
    if pd.api.types.is_numeric_dtype(raw.dtype) and not pd.api.types.is_bool_dtype(raw.dtype):
        values = raw.to_numpy(dtype=np.float64, na_value=np.nan)
        text = None
    else:
        text = _nonempty_text(table, column, role)
        values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(values)
    if bad.any():
        i = _first(bad)
        shown = text.iloc[i] if text is not None else values[i]
        if np.isnan(values[i]) and (text is None or str(shown).lower() in _MISSING_WORDS):
            problem = f"{role} is NaN"
        elif np.isnan(values[i]):
            problem = f"{role} {shown!r} is not a number"
        else:
            problem = f"{role} {shown!r} is not finite"
        raise _fail(table, i, column, problem)
    if limit is not None:
        over = np.abs(values) >= limit if limit == _INT64_LIMIT else np.abs(values) > limit
        if over.any():
            i = _first(over)
            shown = text.iloc[i] if text is not None else float(values[i])
            kind = "int64" if limit == _INT64_LIMIT else "float32"
            raise _fail(table, i, column, f"{role} {shown!r} overflows {kind} (largest magnitude {limit:.6g})")
    return values


def load_ratings_file(
    path: str | Path,
    *,
    user: str = "user_id",
    item: str = "item_id",
    rating: str | None = "rating",
    timestamp: str | None = None,
    sep: str | None = None,
    user_ids: np.ndarray | None = None,
    item_ids: np.ndarray | None = None,
    duplicates: str = "error",
    duplicates_per_timestamp: bool = False,
) -> RatingsData:
    """Read interactions from a delimited text file or a parquet file.

    The format comes from the extension: ``.parquet``/``.pq`` are parquet,
    ``.csv`` is comma-separated, ``.tsv`` tab-separated, anything else
    (``.txt``, ``.inter``, ...) is sniffed (see :func:`embreg.data.files.tables.detect_separator`);
    ``.gz`` text is decompressed. Text files need a header row. Users and items
    are numbered by sorted label unless vocabularies are given.

    Args:
        path: the file.
        user: column holding user ids (ints or strings).
        item: column holding item ids.
        rating: column of ratings; None for implicit feedback (every rating 1).
        timestamp: optional column of integer timestamps (fractions are dropped).
        sep: field separator of a text file; None to infer it.
        user_ids: optional index -> label vocabulary to number users by (e.g. a training file's).
        item_ids: same for items.
        duplicates: what to do with rows of the same (user, item): ``error`` (default), ``first``, ``last`` or
            ``mean`` (:mod:`embreg.data.files.duplicates`).
        duplicates_per_timestamp: a duplicate is the same user, item *and* timestamp (next-item data, where a
            user may take an item again later); needs ``timestamp``.

    Returns:
        :class:`RatingsData` with one entry per data row (per kept row when duplicates are resolved).

    Raises:
        DataError: missing file or column (with the columns present and the closest match), a path that is not
            a regular file (a directory, device or FIFO), empty file, ragged row, empty or NaN id,
            non-numeric/NaN rating or timestamp, a rating beyond float32 or a timestamp beyond int64, duplicate
            interactions under ``duplicates="error"``, or a label absent from a given vocabulary.

    Example:
        >>> p = Path("/tmp/r.csv"); _ = p.write_text("user_id,item_id,rating\\nu1,i1,4\\nu2,i1,5\\n")
        >>> data = load_ratings_file(p)
        >>> len(data), data.num_items, data.ratings.tolist()
        (2, 1, [4.0, 5.0])
    """
    data, _ = read_ratings_file(
        path,
        user=user,
        item=item,
        rating=rating,
        timestamp=timestamp,
        sep=sep,
        user_ids=user_ids,
        item_ids=item_ids,
        duplicates=duplicates,
        duplicates_per_timestamp=duplicates_per_timestamp,
    )
    return data


def read_ratings_file(
    path: str | Path,
    *,
    user: str = "user_id",
    item: str = "item_id",
    rating: str | None = "rating",
    timestamp: str | None = None,
    sep: str | None = None,
    user_ids: np.ndarray | None = None,
    item_ids: np.ndarray | None = None,
    duplicates: str = "error",
    duplicates_per_timestamp: bool = False,
) -> tuple[RatingsData, dict[str, int]]:
    """:func:`load_ratings_file`, also returning ``{"rows_read": data rows, "duplicates_removed": rows}``.

    Example:
        >>> p = Path("/tmp/r2.csv"); _ = p.write_text("user_id,item_id,rating\\nu1,i1,4\\nu1,i1,2\\n")
        >>> data, counts = read_ratings_file(p, duplicates="mean")
        >>> data.ratings.tolist(), counts
        ([3.0], {'rows_read': 2, 'duplicates_removed': 1})
    """
    path = check_regular_file(path, "ratings file")
    check_duplicate_policy(duplicates, rating is not None)
    if duplicates_per_timestamp and timestamp is None:
        raise DataError("duplicates_per_timestamp=True needs the timestamp column (timestamp=...)")
    wanted = [(user, "user id"), (item, "item id")]
    if rating is not None:
        wanted.append((rating, "rating"))
    if timestamp is not None:
        wanted.append((timestamp, "timestamp"))
    is_parquet = path.suffix.lower() in PARQUET_SUFFIXES
    if is_parquet:
        if path.stat().st_size == 0:
            raise DataError(f"{path} is empty")
        table = read_parquet_table(path, wanted)
    else:
        table = read_text_table(path, wanted, sep if sep is not None else detect_separator(path))
    names = table.names
    users = parse_labels(table, names[0], "user id")
    items = parse_labels(table, names[1], "item id")
    position = 2
    values = None
    if rating is not None:
        values = parse_numbers(table, names[position], "rating").astype(np.float32)
        position += 1
    stamps = None
    if timestamp is not None:
        stamps = np.floor(parse_numbers(table, names[position], "timestamp", limit=_INT64_LIMIT)).astype(np.int64)
    keys = [users, items] + ([stamps] if duplicates_per_timestamp and stamps is not None else [])
    key_names = ("user", "item", "timestamp")[: len(keys)]
    kept, values = resolve_duplicates(keys, values, duplicates, table.where, names=key_names, source=str(path))
    counts = {"rows_read": len(table), "duplicates_removed": len(table) - len(kept)}
    if len(kept) < len(table):
        users, items = users[kept], items[kept]
        stamps = None if stamps is None else stamps[kept]
    try:
        data = RatingsData.from_labels(users, items, values, stamps, user_ids=user_ids, item_ids=item_ids)
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from exc
    return data, counts

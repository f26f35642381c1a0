"""Load a user's own labelled texts (CSV, TSV or parquet) into a :class:`TextTask` for fine-tuning.

The file needs a text column and a label column (``text`` and ``label`` by default). Labels are class names or
ids (``kind="classification"``) or numbers (``kind="regression"``). The validation and test sets are fixed by
``split_seed`` and the training set is a subset of the rest drawn by ``subset_seed``
(:func:`embreg.data.labelled_text.few_sample_split`), so training subsets of one ``subset_seed`` are nested.

Text files are read with the project's table reader (:func:`embreg.data.files.tables.read_text_table`, the one
:func:`embreg.data.files.ratings_file.load_ratings_file` uses), so every problem names the file, the file line (the
header is line 1) and the column; parquet files are read with pandas/pyarrow and problems name the 1-based data
row. Every bad input raises :class:`~embreg.errors.DataError`.

Small files: with the default evaluation sizes (``valid_size``/``test_size`` left ``None``: 1000 each), a file of
fewer than 2001 rows gets validation and test sets of 10% of its rows each (at least one row each);
``record["eval_shrunk"]`` is then True and ``record["requested_sizes"]`` keeps the default sizes. Sizes named in
``fit`` (a recipe's sizes the user did not set) give way the same: evaluation sets that leave no training row become
10% each, and a ``train_size`` beyond the rows left becomes all of them (the 80/10/10 rule); ``record["fitted"]``
lists each size that gave way with its value before and after. Other sizes are used as given: sizes the file
cannot hold (and a ``train_size`` beyond the rows left) raise :class:`~embreg.data.labelled_text.SplitSizeError`,
whose ``fits`` names sizes that would fit.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "reviews.csv"
    ...     _ = path.write_text("text,label\\ngreat fit,pos\\ntoo small,neg\\nlove it,pos\\n"
    ...                         "fell apart,neg\\nok I guess,pos\\n")
    ...     task = load_text_file(path, valid_size=1, test_size=1)
    >>> task.name, task.kind, task.num_labels, task.label_names
    ('file-reviews', 'classification', 2, ('neg', 'pos'))
    >>> task.sizes
    {'train': 3, 'valid': 1, 'test': 1}
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from embreg.data.files.ratings_file import (
    _MISSING_WORDS,
    _fail,
    _first,
    _nonempty_text,
    parse_numbers,
)
from embreg.data.files.tables import (
    PARQUET_SUFFIXES,
    Table,
    _base_suffix,
    detect_separator,
    read_parquet_table,
    read_text_table,
)
from embreg.data.files.user_files import check_regular_file
from embreg.data.labelled_text import SPLITS, SplitSizeError, TextTask, few_sample_split
from embreg.errors import DataError

__all__ = ["load_text_file"]

_SEPARATOR_BY_SUFFIX = {".csv": ",", ".tsv": "\t", ".tab": "\t", ".txt": "\t"}
_KINDS = ("classification", "regression")


def _read_table(path: Path, text_col: str, label_col: str, sep: str | None) -> Table:
    """The text and label columns of ``path`` (text: line numbers kept; parquet: native dtypes)."""
    wanted = [(text_col, "text"), (label_col, "label")]
    if path.suffix.lower() in PARQUET_SUFFIXES:
        if path.stat().st_size == 0:
            raise DataError(f"{path} is empty")
        try:
            return read_parquet_table(path, wanted)
        except DataError:
            raise
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise DataError(f"{path} is not a readable parquet file: {exc}") from exc
    if sep is None:
        sep = _SEPARATOR_BY_SUFFIX.get(_base_suffix(path)) or detect_separator(path)
    try:
        return read_text_table(path, wanted, sep)
    except DataError:
        raise
    except OSError as exc:  # e.g. a damaged .gz
        raise DataError(f"{path} cannot be read: {exc}") from exc


def _class_labels(table: Table, column: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Class ids (int64, 0..C-1) of ``column`` and the class names, sorted numerically if all numeric."""
    raw = table.columns[column]
    missing = raw.isna().to_numpy()
    if missing.any():
        raise _fail(table, _first(missing), column, "missing label (null)")
    if pd.api.types.is_bool_dtype(raw.dtype):
        keys = raw.to_numpy(dtype=bool)
        classes, codes = np.unique(keys, return_inverse=True)
        return codes.astype(np.int64), tuple(str(bool(c)) for c in classes)
    if pd.api.types.is_numeric_dtype(raw.dtype):
        values = raw.to_numpy(dtype=np.float64)
        text = None
    else:
        text = _nonempty_text(table, column, "label")
        nan_like = text.str.lower().isin(_MISSING_WORDS).to_numpy()
        if nan_like.any():
            i = _first(nan_like)
            raise _fail(table, i, column, f"missing label ({text.iloc[i]!r})")
        values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        if not np.isfinite(values).all():  # some label is not a number: every label is a string
            classes, codes = np.unique(text.to_numpy(dtype=str), return_inverse=True)
            return codes.astype(np.int64), tuple(str(c) for c in classes)
    bad = ~np.isfinite(values)
    if bad.any():
        i = _first(bad)
        raise _fail(table, i, column, f"label {values[i]!r} is not finite")
    classes, codes = np.unique(values, return_inverse=True)
    if np.all(classes == np.floor(classes)):
        names = tuple(str(int(c)) for c in classes)
    else:
        names = tuple(str(float(c)) for c in classes)
    return codes.astype(np.int64), names


def load_text_file(
    path: str | Path,
    *,
    text_col: str = "text",
    label_col: str = "label",
    kind: Literal["classification", "regression"] = "classification",
    sep: str | None = None,
    train_size: int | None = None,
    valid_size: int | None = None,
    test_size: int | None = None,
    split_seed: int = 0,
    subset_seed: int = 0,
    fit: Collection[str] = (),
) -> TextTask:
    """Read labelled texts from a CSV, TSV or parquet file and split them for fine-tuning.

    The format comes from the extension: ``.parquet``/``.pq`` are parquet, ``.csv`` is comma-separated,
    ``.tsv``/``.tab``/``.txt`` are tab-separated unless ``sep`` is given; any other extension is sniffed
    (:func:`embreg.data.files.tables.detect_separator`) and ``.gz`` text is decompressed. Text files need a header row
    and may quote fields CSV-style (a quoted text may span lines). Texts are stripped of surrounding whitespace.

    Classification labels may be strings or numbers: the distinct values are sorted (numerically, by value, when
    every label is a number; as strings otherwise) and numbered 0..C-1; ``label_names`` are their string forms
    (``"3"`` for an integral value). Regression labels must be finite numbers and become float32 targets.

    With the default evaluation sizes (``None``: 1000 each) a file of fewer than 2001 rows gets validation and test
    sets of 10% of its rows each (at least 1 each); ``record["eval_shrunk"]`` says so and
    ``record["requested_sizes"]`` keeps the default sizes. Explicit sizes are exact.

    Args:
        path: the file.
        text_col: column holding the texts.
        label_col: column holding the labels.
        kind: ``"classification"`` or ``"regression"``.
        sep: field separator of a text file; None to take it from the extension.
        train_size: training examples drawn from the rows left after the evaluation sets; None for all of them.
        valid_size, test_size: sizes of the fixed validation and test sets (``None``: 1000, shrunk on small files).
        split_seed: seed of the validation and test sets.
        subset_seed: seed of the training subset (subsets of one seed are nested across ``train_size``).
        fit: the sizes (``train_size``, ``valid_size``, ``test_size``) that give way when the file cannot hold them.

    Returns:
        :class:`TextTask` named ``file-<stem>``; its ``record`` holds ``dataset="file"``, ``path``, ``text_col``,
        ``label_col``, ``kind``, the seeds, the split ``sizes`` (and ``label_names`` for classification).

    Raises:
        DataError: missing file; empty, unreadable or malformed file (naming the line); missing text or label
            column (listing the columns present and the closest match); a missing or blank text, a missing label,
            a non-numeric regression label (naming the line or row and the column); fewer than 2 classes; fewer
            than 3 rows; a path that is not a regular file. :class:`~embreg.data.labelled_text.SplitSizeError`
            (a ``DataError``): explicit evaluation sizes the file cannot hold, or a ``train_size`` larger than the
            rows left after the evaluation sets.
    """
    if kind not in _KINDS:
        raise DataError(f"kind={kind!r} must be 'classification' or 'regression'")
    if text_col == label_col:
        raise DataError(f"text_col and label_col are both {text_col!r}; they must be different columns")
    file = check_regular_file(path, "text file")
    table = _read_table(file, text_col, label_col, sep)
    text_name, label_name = table.names
    texts = _nonempty_text(table, text_name, "text").tolist()
    if kind == "classification":
        labels, label_names = _class_labels(table, label_name)
        if len(label_names) < 2:
            raise DataError(
                f"{file}: column {label_name!r} has {len(label_names)} distinct label(s) "
                f"{list(label_names)}; classification needs at least 2"
            )
    else:
        labels = parse_numbers(table, label_name, "label").astype(np.float32)
        label_names = ()

    num_rows = len(texts)
    if num_rows < 3:
        raise DataError(
            f"{file} has {num_rows} data row(s); at least 3 are needed (one each for train, valid and test)"
        )
    given = {"valid_size": valid_size, "test_size": test_size, "train_size": train_size}
    defaults = {"valid": valid_size is None or "valid_size" in fit, "test": test_size is None or "test_size" in fit}
    valid_size = 1000 if valid_size is None else valid_size
    test_size = 1000 if test_size is None else test_size
    requested = {"valid": valid_size, "test": test_size}
    small = max(1, num_rows // 10)
    shrunk = any(defaults.values()) and num_rows < valid_size + test_size + 1
    if shrunk:
        valid_size = small if defaults["valid"] else valid_size
        test_size = small if defaults["test"] else test_size
    pool = num_rows - valid_size - test_size
    if "train_size" in fit and train_size is not None and pool >= 1 and train_size > pool:
        train_size = None  # every row left
    used = {"valid_size": valid_size, "test_size": test_size, "train_size": pool if train_size is None else train_size}
    fitted = {key: [given[key], used[key]] for key in given if given[key] != used[key] and given[key] is not None}
    fitted.update({key: [None, used[key]] for key in ("valid_size", "test_size") if given[key] is None and shrunk})
    if pool < 1:
        fits = {"valid_size": small, "test_size": small}
        if train_size is not None and train_size > num_rows - 2 * small:
            fits["train_size"] = num_rows - 2 * small
        raise SplitSizeError(
            f"{file} ({num_rows} rows): valid_size={valid_size} + test_size={test_size} leave no training rows",
            fits,
        )
    if train_size is not None and not 1 <= train_size <= pool:
        raise SplitSizeError(
            f"{file} ({num_rows} rows): train_size={train_size} is outside [1, {pool}], the rows left after the "
            f"validation ({valid_size}) and test ({test_size}) sets",
            {"train_size": pool},
        )
    try:
        split = few_sample_split(
            num_rows,
            train_size=train_size,
            valid_size=valid_size,
            test_size=test_size,
            split_seed=split_seed,
            subset_seed=subset_seed,
        )
    except DataError as exc:
        raise DataError(f"{file} ({num_rows} rows): {exc}") from exc

    record: dict[str, object] = {
        "dataset": "file",
        "path": str(path),
        "text_col": text_col,
        "label_col": label_col,
        "kind": kind,
        "split_seed": split_seed,
        "subset_seed": subset_seed,
        "sizes": {s: int(split[s].size) for s in SPLITS},
        "eval_shrunk": shrunk,
    }
    if shrunk:
        record["requested_sizes"] = requested
    if fitted:
        record["fitted"] = fitted
    if kind == "classification":
        record["label_names"] = list(label_names)
    return TextTask(
        name=f"file-{Path(path).stem}",
        kind=kind,
        num_labels=len(label_names) if kind == "classification" else 1,
        texts={s: [texts[i] for i in split[s]] for s in SPLITS},
        labels={s: labels[split[s]] for s in SPLITS},
        label_names=label_names,
        record=record,
    )

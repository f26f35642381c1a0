"""How a recipe names a user's data file (``data.path``), and what its run records of the data it used.

When ``data.path`` is set it replaces the recipe's dataset, so the data section says so: ``dataset`` becomes
``file``, ``path`` is resolved to an absolute path and ``sha256`` holds the file's checksum (given in a recipe, it
is the checksum the file must have). ``config.yaml`` then names the file and its bytes, never the dataset the file
replaced; a shipped recipe's description, written for its own dataset, gives way to one naming the file. When
the data is loaded the file must still have that checksum, and ``split.json`` and ``report.md`` record the file
path, its sha256 and the rows read, merged as duplicates and used (:func:`file_record`).

Example:
    >>> import tempfile
    >>> from embreg.recipes import load_recipe
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "ratings.csv"
    ...     _ = path.write_text("user_id,item_id,rating\\n1,2,4\\n")
    ...     recipe = load_recipe("mf", [f"data.path={path}"])
    >>> recipe.data.dataset, recipe.data.sha256[:12], recipe.description
    ('file', '33d35d96ccfd', 'mf recipe (model mf, task rating) on the file ratings.csv (data.path)')
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from embreg.data.cache import sha256_file
from embreg.data.splits import min_split_rows
from embreg.data.user_files import describe_file, resolved_path
from embreg.errors import ConfigError, DataError

__all__ = [
    "resolve_data_file",
    "checked_file",
    "file_record",
    "describe_user_file",
    "data_line",
    "require_split_rows",
    "FILE_DATASET",
]

FILE_DATASET = "file"
"""The ``data.dataset`` of a recipe whose data is a user's file (``data.path``)."""


def resolve_data_file(data: Any) -> None:
    """Normalises a data section that may name a user's file (called from its ``__post_init__``).

    With ``data.path`` set: ``dataset`` becomes ``file``, ``path`` absolute, and ``sha256`` the file's checksum
    when not given and the file is there (a missing file is reported when the data is loaded).

    Raises:
        ConfigError: ``dataset: file`` without a path; ``sha256`` without a path or not 64 hex digits.
    """
    if data.path is None:
        if data.dataset == FILE_DATASET:
            raise ConfigError("data.dataset='file' needs data.path (the file to read)")
        if data.sha256 is not None:
            raise ConfigError(f"data.sha256={data.sha256!r} is the checksum of data.path, which is not set")
        return
    data.dataset = FILE_DATASET
    path = resolved_path(data.path)
    data.path = str(path)
    if data.sha256 is not None:
        digest = str(data.sha256).lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ConfigError(f"data.sha256={data.sha256!r} must be 64 hexadecimal digits (a sha256)")
        data.sha256 = digest
    elif path.is_file():
        data.sha256 = sha256_file(path)


def checked_file(data: Any) -> dict[str, Any]:
    """:func:`~embreg.data.user_files.describe_file` of ``data.path``, checked against ``data.sha256``.

    Raises:
        DataError: the path is missing or not a regular file, or its bytes are not those of ``data.sha256``.
    """
    record = describe_file(data.path)
    if data.sha256 is not None and record["sha256"] != data.sha256:
        raise DataError(
            f"{data.path} has sha256 {record['sha256']}, not data.sha256={data.sha256}: the file changed since "
            "the recipe named it; set data.sha256=null to take the file as it is now"
        )
    return record


def file_record(described: dict[str, Any], counts: dict[str, int] | None, rows: int, **extra: Any) -> dict[str, Any]:
    """The ``data`` entry of ``split.json``: the file (path, bytes, sha256), rows read, duplicates resolved, rows used.

    Example:
        >>> file_record({"path": "/d/r.csv", "bytes": 9, "sha256": "ab"}, {"rows_read": 5, "duplicates_removed": 1}, 4)
        {'path': '/d/r.csv', 'bytes': 9, 'sha256': 'ab', 'rows_read': 5, 'duplicates_removed': 1, 'rows': 4}
    """
    return {**described, **(counts or {}), "rows": int(rows), **extra}


def require_split_rows(rows: int, fractions: list[float], source: dict[str, Any]) -> None:
    """Raises a one-line :class:`DataError` when ``rows`` are too few for a random split with no empty part.

    Example:
        >>> require_split_rows(3, [0.8, 0.1, 0.1], {"path": "/d/r.csv"})
        Traceback (most recent call last):
        ...
        embreg.errors.DataError: /d/r.csv: 3 data row(s) to split; a random split [0.8, 0.1, 0.1] with no empty part needs at least 7
    """
    needed = min_split_rows(tuple(fractions))
    if rows < needed:
        where = source.get("path", source.get("dataset", "the data"))
        raise DataError(
            f"{where}: {rows} data row(s) to split; a random split {list(fractions)} with no empty part needs at "
            f"least {needed}"
        )


@cache
def _shipped_descriptions() -> frozenset[str]:
    from embreg.recipes.shipped import list_recipes

    return frozenset(list_recipes().values())


def describe_user_file(recipe: Any) -> None:
    """Replaces a shipped recipe's description by one naming the user's file when ``data.path`` overrides its
    dataset (the shipped text names the recipe's own dataset). A description of the user's own is kept."""
    path = getattr(recipe.data, "path", None)
    if path is None or recipe.description not in _shipped_descriptions():
        return
    model = recipe.model.name if recipe.model is not None else "none"
    recipe.description = (
        f"{recipe.name} recipe (model {model}, task {recipe.task}) on the file {Path(path).name} (data.path)"
    )


def data_line(record: dict[str, Any] | None) -> str:
    """One markdown line naming the data a run used (for ``report.md``); empty without a record.

    Example:
        >>> data_line({"path": "/d/r.csv", "sha256": "ab", "rows_read": 5, "duplicates_removed": 1,
        ...            "duplicates": "mean", "rows": 4})
        'data: file `/d/r.csv` (sha256 `ab`): 5 rows read, 1 duplicate rows resolved by `mean`, 4 rows used'
    """
    if not record:
        return ""
    if "path" in record:
        text = f"data: file `{record['path']}` (sha256 `{record['sha256']}`)"
    else:
        text = f"data: dataset `{record.get('dataset', '?')}`"
    parts = []
    if "rows_read" in record:
        parts.append(f"{record['rows_read']} rows read")
    if record.get("duplicates_removed"):
        parts.append(f"{record['duplicates_removed']} duplicate rows resolved by `{record.get('duplicates', '?')}`")
    if "rows" in record:
        parts.append(f"{record['rows']} rows used")
    text += ": " + ", ".join(parts) if parts else ""
    text += f"; encoder: {record['encoder']}" if record.get("encoder") else ""
    return text + (f"; {record['mlm_head']}" if record.get("mlm_head") else "")

"""How a recipe names a user's data file (``data.path``), and what its run records of the data it used.

When ``data.path`` is set it replaces the recipe's dataset, so the data section says so: ``dataset`` becomes
``file``, ``path`` is resolved to an absolute path and ``sha256`` holds the file's checksum (given in a recipe, it
is the checksum the file must have). ``config.yaml`` then names the file and its bytes, never the dataset the file
replaced; a shipped recipe's description, written for its own dataset, gives way to one naming the file. When
the data is loaded the file must still have that checksum, and ``split.json`` and ``report.md`` record the file
path, its sha256 and the rows read, merged as duplicates, dropped by a filter and used (:func:`file_record`).

A shipped recipe is written for its own dataset, so on a user's file (:func:`file_section`):

* the settings that describe that dataset (a data section's ``DATASET_SETTINGS``: translation's ``min_words``,
  the dictionary data's 3-word rule) give way to the section's defaults, unless the user set them;
* its sizes (a data section's ``FILE_SIZES``: evaluation sets, sampled negatives) are listed in
  ``data.fit_to_file``, unless the user set them: a size listed there that the file cannot hold falls back to the
  80/10/10 rule (or, for negatives, to what the catalogue allows), said on stderr and in ``report.md``
  (:func:`note_fitted`); a size the user set (on the command line, in their own YAML file, or in Python) that does
  not fit is refused. Sizes a recipe file of the user's own leaves out are defaults and fit too.

Whatever a filter drops (pairs below ``data.min_words``, blank lines, rows beyond ``data.max_*``) is counted on
stderr and in ``report.md`` (:func:`note_dropped`).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from embreg.recipes import load_recipe
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "ratings.csv"
    ...     _ = path.write_text("user_id,item_id,rating\\n1,2,4\\n")
    ...     recipe = load_recipe("mf", [f"data.path={path}"])
    >>> recipe.data.dataset, recipe.data.sha256[:12], recipe.description
    ('file', '33d35d96ccfd', 'mf recipe (model mf, task rating) on the file ratings.csv (data.path)')
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Collection, Iterator, Mapping
from typing import Any, Literal

from embreg.data.cache import sha256_file
from embreg.data.files.user_files import describe_file, resolved_path
from embreg.data.splits import min_split_rows
from embreg.errors import ConfigError, DataError

__all__ = [
    "file_section",
    "check_fit_to_file",
    "note_dropped",
    "note_fitted",
    "notice",
    "quiet_notices",
    "resolve_data_file",
    "checked_file",
    "file_record",
    "data_line",
    "require_split_rows",
    "FILE_DATASET",
]

FILE_DATASET = "file"
"""The ``data.dataset`` of a recipe whose data is a user's file (``data.path``)."""


def file_section(data: Mapping[str, Any], config: type, *, shipped: bool, user_keys: Collection[str] = ()) -> dict:
    """The ``data`` mapping of a recipe, with what a user's file (``path``) changes in it (module docstring).

    Args:
        data: the recipe's ``data`` section as loaded (not modified).
        config: the task's data dataclass (its ``DATASET_SETTINGS`` and ``FILE_SIZES``, where it has them).
        shipped: the section comes from a recipe shipped with embreg, where ``user_keys`` were set by the user;
            otherwise every key present was set by the user.
        user_keys: the data keys the user set on top of the shipped recipe (``--set data.KEY=...``).

    Example:
        >>> from embreg.tasks.text.task import LabelledTextConfig
        >>> shipped = {"dataset": "reviews", "path": "my.csv", "train_size": 1000, "valid_size": 500}
        >>> file_section(shipped, LabelledTextConfig, shipped=True, user_keys={"path", "valid_size"})["fit_to_file"]
        ['train_size', 'test_size']
        >>> file_section({"path": "my.csv", "valid_size": 50}, LabelledTextConfig, shipped=False)["fit_to_file"]
        ['train_size', 'test_size']
    """
    section = dict(data)
    if section.get("path") is None:
        return section
    given = set(user_keys) if shipped else set(section)
    for key in getattr(config, "DATASET_SETTINGS", ()):
        if key not in given:
            section.pop(key, None)
    sizes = getattr(config, "FILE_SIZES", ())
    if sizes and "fit_to_file" not in section:
        section["fit_to_file"] = [key for key in sizes if key not in given]
    return section


def check_fit_to_file(data: Any) -> None:
    """Checks ``data.fit_to_file``: sizes of the section's ``FILE_SIZES``, and only with a user's file.

    Raises:
        ConfigError: an entry that is no size of this data section, or a non-empty list without ``data.path``.
    """
    sizes = getattr(type(data), "FILE_SIZES", ())
    unknown = [key for key in data.fit_to_file if key not in sizes]
    if unknown:
        raise ConfigError(f"data.fit_to_file={data.fit_to_file}: {unknown[0]!r} is not one of {', '.join(sizes)}")
    if data.fit_to_file and data.path is None:
        raise ConfigError(
            f"data.fit_to_file={data.fit_to_file} fits sizes to a user's file, and data.path is not set; remove it"
        )


_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("embreg_quiet_notices", default=False)


def notice(message: str) -> None:
    """One line on stderr, ``embreg: note: <message>`` (from rank 0 alone under ``torchrun``; none inside
    :func:`quiet_notices`)."""
    from embreg.train.distributed import current

    if current().is_main and not _QUIET.get():
        print(f"embreg: note: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def quiet_notices() -> Iterator[None]:
    """No :func:`notice` lines inside the block: serving prepares a run's data again, and what training said of it
    (sizes fitted to the file, rows dropped) is in the run's ``report.md`` and ``split.json`` already.

    Example:
        >>> with quiet_notices():
        ...     notice("not printed")
    """
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def note_dropped(
    record: dict[str, Any], where: str, dropped: Mapping[str, int], action: Literal["dropped", "cut"] = "dropped"
) -> None:
    """Counts what filters dropped (or cut): ``record[action]`` (``{what: count}``, counts above 0) and one notice.

    Args:
        record: the data record (``split.json``'s ``data``, the report's line).
        where: the file.
        dropped: ``{what was dropped and by which setting: count}``, e.g. ``{"pairs below data.min_words=3": 241}``.
        action: ``dropped`` (left out) or ``cut`` (shortened).

    Example:
        >>> record = {}
        >>> note_dropped(record, "pairs.tsv", {"pairs below data.min_words=3": 0, "blank lines": 2})  # stderr:
        >>> # embreg: note: pairs.tsv: 2 blank lines dropped
        >>> record
        {'dropped': {'blank lines': 2}}
    """
    counts = {what: int(count) for what, count in dropped.items() if count > 0}
    if not counts:
        return
    record[action] = {**record.get(action, {}), **counts}
    notice(f"{where}: " + ", ".join(f"{count} {what} {action}" for what, count in counts.items()))


def note_fitted(record: dict[str, Any], where: str, fitted: Mapping[str, tuple[Any, Any]], rule: str) -> None:
    """Records sizes that gave way to the file (``record["fitted"]``: ``{key: [set, used]}``) and says so once.

    Args:
        record: the data record (``split.json``'s ``data``, the report's line).
        where: the file.
        fitted: ``{data key: (the recipe's value, the value used)}``.
        rule: the rule that gave the values used.
    """
    if not fitted:
        return
    record["fitted"] = {key: [before, after] for key, (before, after) in fitted.items()}
    sizes = ", ".join(f"data.{key}={_value(before)} -> {_value(after)}" for key, (before, after) in fitted.items())
    notice(f"{where} is too small for the recipe's sizes; {rule}: {sizes} (a size you set is used as given)")


def _value(value: Any) -> str:
    """A size as a recipe writes it (``null`` for None: the default, or every row left)."""
    return "null" if value is None else str(value)


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
    """:func:`~embreg.data.files.user_files.describe_file` of ``data.path``, checked against ``data.sha256``.

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
    parts += [f"{count} {what} dropped" for what, count in record.get("dropped", {}).items()]
    if "rows" in record:
        parts.append(f"{record['rows']} rows used")
    parts += [f"{count} {what} cut" for what, count in record.get("cut", {}).items()]
    parts += [
        f"`data.{key}={_value(before)}` fitted to {_value(after)}"
        for key, (before, after) in record.get("fitted", {}).items()
    ]
    text += ": " + ", ".join(parts) if parts else ""
    text += f"; encoder: {record['encoder']}" if record.get("encoder") else ""
    return text + (f"; {record['mlm_head']}" if record.get("mlm_head") else "")

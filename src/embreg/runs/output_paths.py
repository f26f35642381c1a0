"""Where a command may write: the one check of every ``--out`` before any work is done.

Two kinds of output exist. A run directory or an export (``embreg run --out``, ``embreg export --out``) is a
directory: :func:`check_output_directory` refuses a path that is an existing file or lies below one (``--out
notes.txt/run``). A table or text (``embreg predict | recommend | score | translate | ensemble --out``) is a file:
:func:`check_output_file` refuses

* a path that lies below a file, or is an existing directory;
* a file of a run (:func:`run_file_owner`: ``best.safetensors``, ``config.yaml``, ``metrics.json`` ... in a run
  directory, or anything below its ``snapshots/`` or ``tensorboard/``), whichever run it belongs to, so serving
  never destroys a run;
* the command's own input file (``--out`` = ``--input``), which would be overwritten while it is read;
* an existing file, unless ``overwrite`` (``--overwrite``) is given: as ``embreg run --out`` refuses another run's
  files and ``embreg export --out`` a non-empty directory, an earlier result is never replaced unasked.

Paths are compared after resolving symbolic links, so a link to a run's checkpoint is refused like the checkpoint.

Example:
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     run = pathlib.Path(d) / "run"
    ...     run.mkdir()
    ...     _ = (run / "config.yaml").write_text("name: mf\\n")
    ...     try:
    ...         check_output_file(run / "best.safetensors")
    ...     except OutputPathError as error:
    ...         print("refused:", "would overwrite best.safetensors, a file of the run" in str(error))
    ...     check_output_file(run / "predictions.csv").name
    refused: True
    'predictions.csv'
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from embreg.errors import ConfigError
from embreg.runs.run_layout import CONFIG, LOCK, RUN_ENTRIES, RUN_RECORD

__all__ = ["OutputPathError", "check_output_file", "check_output_directory", "run_file_owner"]


class OutputPathError(ConfigError):
    """An ``--out`` path a command may not write: it would destroy a run or the input, or it cannot be created."""


def _blocking_file(path: Path) -> Path | None:
    """The first existing non-directory among ``path``'s parents (``None``: every existing parent is a directory)."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return None


def check_output_directory(path: str | Path, what: str = "--out") -> None:
    """Refuses a directory output that cannot be a directory: an existing file, or a path below a file.

    Args:
        path: the directory to write.
        what: how the message names the setting (``--out``, ``out_dir``).

    Raises:
        OutputPathError: naming the file in the way.
    """
    target = Path(path)
    blocking = _blocking_file(target)
    if blocking is not None:
        raise OutputPathError(
            f"{what} {str(target)!r} lies below {str(blocking)!r}, which is a file; choose a directory"
        )
    if target.exists() and not target.is_dir():
        raise OutputPathError(f"{what} {str(target)!r} is an existing file, not a directory; choose a directory")


def run_file_owner(path: str | Path) -> Path | None:
    """The run directory of which ``path`` is a file (or lies below one of its entries); ``None`` otherwise.

    A run directory is one holding ``config.yaml`` or ``run.json``; its files are the names a run writes
    (:data:`embreg.runs.run_layout.RUN_ENTRIES` and ``.lock``), whether they exist yet or not.

    Example:
        >>> run_file_owner("/nowhere/predictions.csv") is None
        True
    """
    resolved = Path(path).resolve()
    for parent in resolved.parents:
        first = resolved.relative_to(parent).parts[0]
        if first not in RUN_ENTRIES and first != LOCK:
            continue
        if (parent / CONFIG).is_file() or (parent / RUN_RECORD).is_file():
            return parent
    return None


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def check_output_file(
    path: str | Path, *, inputs: Sequence[str | Path] = (), overwrite: bool = False, what: str = "--out"
) -> Path:
    """Refuses a file output that would destroy a run, the input or an earlier result (see the module docstring).

    Args:
        path: the file to write.
        inputs: the files the command reads (never overwritten, even with ``overwrite``).
        overwrite: replace an existing file that is neither a run's nor an input.
        what: how the message names the setting.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OutputPathError: naming the path and what it would destroy or why it cannot be written.
    """
    target = Path(path)
    blocking = _blocking_file(target)
    if blocking is not None:
        raise OutputPathError(
            f"{what} {str(target)!r} lies below {str(blocking)!r}, which is a file; choose a file path"
        )
    if target.is_dir():
        raise OutputPathError(f"{what} {str(target)!r} is a directory; name a file to write")
    owner = run_file_owner(target)
    if owner is not None:
        raise OutputPathError(
            f"{what} {str(target)!r} would overwrite {target.name}, a file of the run in {str(owner)!r}; a run's "
            "files are never written by serving. Choose another file"
        )
    for source in inputs:
        if _same_file(target, Path(source)):
            raise OutputPathError(f"{what} {str(target)!r} is the input file; choose another file to write")
    if target.exists() and not overwrite:
        raise OutputPathError(
            f"{what} {str(target)!r} exists; replace it with --overwrite (nothing else is ever overwritten), or "
            "choose another file"
        )
    return target

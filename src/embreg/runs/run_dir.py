"""The run directory: its layout, and the only writer of its files (their names: :mod:`embreg.runs.run_layout`).

A single-seed run directory holds:

=====================  =============================================================================
``config.yaml``        the resolved recipe (every default filled in)
``split.json``         the task's record of its data (``corpus.json`` for language models)
``history.jsonl``      one JSON line per epoch
``last.safetensors``   everything needed to continue (model, optimizer, RNG, counters, history)
``best.safetensors``   the model of the best validation epoch
``metrics.json``       validation and test metrics of the best epoch (and the runner's timings)
``report.md``          a short human-readable report
``metrics.csv``        the history as a table, when ``train.log_to`` lists ``csv`` (:mod:`embreg.train.loggers`)
``tensorboard/``       TensorBoard event files, when ``train.log_to`` lists ``tensorboard``
``run.json``           how the run was started: its layout (``single`` or ``seeds``), world size and the
                       resolved config it trains with (``config``); and where it stands: ``status`` is
                       ``training``, then ``finished`` once ``metrics.json`` is final, or ``failed`` (with the
                       ``error``) when training diverged or its final metrics are not finite
``backends.json``      which backend each C++ kernel took (:func:`embreg._native.backend_record`)
``steps.csv``          training loss and learning rate every ``train.log_every`` steps, with ``log_to: [csv]``
``.lock``              present while a run writes here (:meth:`RunDirectory.lock`)
=====================  =============================================================================

A multi-seed run directory holds ``seed-<s>/`` run directories plus ``config.yaml``, ``summary.json`` (mean, std,
median, min, max and values of every metric) and ``report.md``. Every file is written atomically
(:mod:`embreg.runs.checkpoint`); checkpoints are safetensors files whose loading never runs code. One run writes
into a directory at a time: :meth:`RunDirectory.lock` refuses a second one with
:class:`~embreg.errors.RunDirectoryLockedError` instead of letting their files interleave. A directory belongs to
one run: :meth:`RunDirectory.claim` refuses to start a run where another run's files are, unless the run continues
them (``resume``) or empties the directory first (``overwrite``, which never deletes files that are not a run's).

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     run = RunDirectory(d)
    ...     _ = run.write_metrics({"test_rmse": 0.9})
    ...     run.read_metrics(), run.seed(3).path.name
    ({'test_rmse': 0.9}, 'seed-3')
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import torch
import yaml

from embreg._locking import hold_lock
from embreg.errors import ConfigError, DataError, RunDirectoryLockedError
from embreg.runs.checkpoint import atomic_write_json, atomic_write_text, load_checkpoint, save_checkpoint
from embreg.runs.output_paths import check_output_directory
from embreg.runs.run_layout import (
    BEST_CHECKPOINT,
    CONFIG,
    FINISHED_KEY,
    HISTORY,
    LAST_CHECKPOINT,
    LEGACY_LAST_CHECKPOINT,
    LOCK,
    METRICS,
    METRICS_CSV,
    REPORT,
    RUN_ENTRIES,
    RUN_RECORD,
    SUMMARY,
    TENSORBOARD_DIR,
)

__all__ = [
    "RunDirectory",
    "CONFIG",
    "HISTORY",
    "METRICS",
    "REPORT",
    "SUMMARY",
    "LAST_CHECKPOINT",
    "BEST_CHECKPOINT",
    "LEGACY_LAST_CHECKPOINT",
    "LOCK",
    "METRICS_CSV",
    "TENSORBOARD_DIR",
    "RUN_RECORD",
    "RUN_ENTRIES",
    "RunDirectoryLockedError",
    "RunDirectoryInUseError",
    "RUN_STATUSES",
    "run_status",
]

RUN_STATUSES = ("training", "finished", "failed")
"""The ``status`` a single-seed run's ``run.json`` holds (:meth:`RunDirectory.write_status`)."""
_SEED_DIR = re.compile(r"seed-\d+")


class RunDirectoryInUseError(ConfigError):
    """A run was started in a directory that holds another run's files, without ``resume`` or ``overwrite``; or
    ``overwrite`` was asked of a directory that holds files which are not a run's."""


Checkpoint = Literal["best", "last"]


class RunDirectory:
    """Reads and writes the files of one run directory (see the module docstring for the layout).

    Args:
        path: the directory (created on the first write).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.path)!r})"

    def file(self, name: str) -> Path:
        return self.path / name

    def seed(self, seed: int) -> RunDirectory:
        """The run directory of one seed of a multi-seed run."""
        return RunDirectory(self.path / f"seed-{seed}")

    @contextlib.contextmanager
    def lock(self) -> Iterator[RunDirectory]:
        """Holds ``<run_dir>/.lock`` while one run writes here (creating the directory); removed on exit, and the
        directory too when this call created it and nothing was written into it.

        The lock is ``fcntl.flock`` on that file, so it dies with its process: a crashed run never leaves a stale
        lock. A second holder, in this process or another, is refused at once.

        Raises:
            RunDirectoryLockedError: another run holds the lock (the message names the directory and its pid).
            OutputPathError: the path is a file, or lies below one
                (:func:`embreg.runs.output_paths.check_output_directory`).

        Example:
            >>> import tempfile
            >>> with tempfile.TemporaryDirectory() as d:
            ...     with RunDirectory(d).lock():
            ...         try:
            ...             with RunDirectory(d).lock():
            ...                 pass
            ...         except RunDirectoryLockedError as error:
            ...             print("refused:", "another run is writing" in str(error))
            refused: True
        """
        check_output_directory(self.path, "run directory")
        path = self.file(LOCK)

        def refused(holder: str) -> RunDirectoryLockedError:
            pid = f" (pid {holder})" if holder else ""
            return RunDirectoryLockedError(
                f"run directory {self.path} is locked: another run is writing there{pid}. Wait for it to finish, "
                f"or write this run to another directory (lock file {path})"
            )

        existed = self.path.exists()
        try:
            with hold_lock(path, refused=refused):
                yield self
        finally:
            if not existed:  # a run that failed before writing anything leaves no empty directory behind
                with contextlib.suppress(OSError):
                    self.path.rmdir()  # only an empty directory can be removed

    # -- ownership -----------------------------------------------------------------------------------------------
    def run_entries(self) -> list[str]:
        """The entries here that a run wrote (sorted; directories end in ``/``), ``.lock`` left out.

        Example:
            >>> import tempfile
            >>> with tempfile.TemporaryDirectory() as d:
            ...     run = RunDirectory(d)
            ...     _ = run.write_metrics({"test_rmse": 0.9})
            ...     _ = run.seed(1).write_metrics({"test_rmse": 0.8})
            ...     run.run_entries()
            ['metrics.json', 'seed-1/']
        """
        if not self.path.is_dir():
            return []
        return sorted(_entry_name(p) for p in self.path.iterdir() if _is_run_entry(p))

    def foreign_entries(self) -> list[str]:
        """The entries here (and in ``seed-<s>/`` directories) that no run writes: what ``overwrite`` keeps.

        Example:
            >>> import tempfile, pathlib
            >>> with tempfile.TemporaryDirectory() as d:
            ...     _ = RunDirectory(d).write_config({"name": "mf"})
            ...     _ = (pathlib.Path(d) / "notes.txt").write_text("mine")
            ...     RunDirectory(d).foreign_entries()
            ['notes.txt']
        """
        if not self.path.is_dir():
            return []
        found: list[str] = []
        for entry in sorted(self.path.iterdir()):
            if entry.name == LOCK:
                continue
            if _SEED_DIR.fullmatch(entry.name) and entry.is_dir():
                found += [f"{entry.name}/{name}" for name in RunDirectory(entry).foreign_entries()]
            elif not _is_run_entry(entry):
                found.append(_entry_name(entry))
        return found

    def claim(self, *, resume: bool = False, overwrite: bool = False) -> None:
        """Makes sure that a run may write here: the directory is free of another run's files, or the run continues
        them (``resume``), or they are deleted first (``overwrite``). Call it while holding :meth:`lock`.

        ``overwrite`` deletes only what a run writes (:data:`RUN_ENTRIES` and ``seed-<s>/`` directories), and only
        when nothing else is here: a directory holding any other file (a mistyped ``--out ~``, a project folder) is
        refused, naming those files, and left untouched. Files of no run, without ``overwrite``, are left alone and
        the run writes beside them. ``.lock`` is never deleted (the caller holds it).

        Args:
            resume: the run continues the run that is here (its config is checked elsewhere,
                :mod:`embreg.recipes.resume_check`).
            overwrite: delete the run that is here before starting.

        Raises:
            ConfigError: both ``resume`` and ``overwrite``.
            RunDirectoryInUseError: another run's files are here and neither ``resume`` nor ``overwrite`` was
                given (the message names them and both ways on), or ``overwrite`` meets files that are not a run's.

        Example:
            >>> import tempfile
            >>> with tempfile.TemporaryDirectory() as d:
            ...     _ = RunDirectory(d).write_metrics({"test_rmse": 0.9})
            ...     try:
            ...         RunDirectory(d).claim()
            ...     except RunDirectoryInUseError as error:
            ...         print("refused:", "--overwrite" in str(error))
            ...     RunDirectory(d).claim(overwrite=True)
            ...     RunDirectory(d).run_entries()
            refused: True
            []
        """
        if resume and overwrite:
            raise ConfigError(
                "resume and overwrite exclude each other: resume continues the run in the directory, overwrite "
                "deletes it first; choose one"
            )
        there = self.run_entries()
        if not there or resume:
            return
        if not overwrite:
            raise RunDirectoryInUseError(
                f"run directory {self.path} already holds another run's files ({', '.join(there)}); a run directory "
                "belongs to one run. Continue that run with --resume (resume=True; its config is checked against "
                "this one), delete it first with --overwrite (overwrite=True), or choose another directory"
            )
        foreign = self.foreign_entries()
        if foreign:
            shown = ", ".join(foreign[:10]) + (f", ... ({len(foreign)} in all)" if len(foreign) > 10 else "")
            raise RunDirectoryInUseError(
                f"--overwrite (overwrite=True) refuses to empty {self.path}: besides a run's files it holds files no "
                f"run writes ({shown}). Nothing was deleted; choose another directory, or remove them yourself"
            )
        for name in there:
            entry = self.path / name.rstrip("/")
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def write_run_record(self, record: Mapping[str, Any]) -> Path:
        """``run.json``: how the run was started (``layout``, ``world_size``), compared when it is resumed."""
        return atomic_write_json(self.file(RUN_RECORD), dict(record))

    def write_status(self, status: str, error: str | None = None) -> Path:
        """Sets ``status`` (one of :data:`RUN_STATUSES`) in ``run.json``, with ``error`` for ``failed``.

        Raises:
            ValueError: an unknown status.
        """
        if status not in RUN_STATUSES:
            raise ValueError(f"status {status!r} must be one of {', '.join(RUN_STATUSES)}")
        record = {key: value for key, value in (self.read_run_record() or {}).items() if key != "error"}
        record["status"] = status
        if error is not None:
            record["error"] = error
        return self.write_run_record(record)

    def read_run_record(self) -> dict[str, Any] | None:
        """``run.json`` (``None`` when the directory has none, e.g. a run of an older version).

        Raises:
            DataError: the file is not valid JSON.
        """
        return self._read_json(RUN_RECORD)

    def read_config(self) -> dict[str, Any] | None:
        """``config.yaml`` as a mapping (``None`` when there is none).

        Raises:
            DataError: the file is not a YAML mapping.
        """
        path = self.file(CONFIG)
        if not path.is_file():
            return None
        try:
            config = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise DataError(f"{path} is not valid YAML ({exc})") from exc
        if not isinstance(config, dict):
            raise DataError(f"{path} holds no config mapping (found {type(config).__name__})")
        return config

    # -- plain files ---------------------------------------------------------------------------------------------
    def write_config(self, config: Mapping[str, Any]) -> Path:
        return atomic_write_text(self.file(CONFIG), yaml.safe_dump(dict(config), sort_keys=False))

    def write_record(self, name: str, record: Mapping[str, Any]) -> Path:
        """A JSON record of the run's data (``split.json``, ``corpus.json``)."""
        if "/" in name or not name.endswith(".json"):
            raise ValueError(f"record name {name!r} must be a plain '*.json' file name")
        return atomic_write_json(self.file(name), dict(record))

    def read_record(self, name: str) -> dict[str, Any] | None:
        """A JSON record written by :meth:`write_record` (``None`` when there is none)."""
        return self._read_json(name)

    def write_history(self, records: Iterable[Mapping[str, Any]]) -> Path:
        lines = "".join(json.dumps(dict(record), sort_keys=True) + "\n" for record in records)
        return atomic_write_text(self.file(HISTORY), lines)

    def read_history(self) -> list[dict[str, Any]]:
        path = self.file(HISTORY)
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def write_metrics(self, metrics: Mapping[str, Any]) -> Path:
        return atomic_write_json(self.file(METRICS), dict(metrics))

    def read_metrics(self) -> dict[str, Any] | None:
        """``metrics.json`` (``None`` when the run has none yet).

        Raises:
            DataError: the file is not valid JSON.
        """
        return self._read_json(METRICS)

    def _read_json(self, name: str) -> dict[str, Any] | None:
        path = self.file(name)
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise DataError(f"{path} is not valid JSON ({exc})") from exc

    def write_report(self, text: str) -> Path:
        return atomic_write_text(self.file(REPORT), text)

    def write_summary(self, summary: Mapping[str, Any]) -> Path:
        return atomic_write_json(self.file(SUMMARY), dict(summary))

    # -- checkpoints -----------------------------------------------------------------------------------------------
    @staticmethod
    def checkpoint_name(which: Checkpoint) -> str:
        return {"best": BEST_CHECKPOINT, "last": LAST_CHECKPOINT}[which]

    def has_checkpoint(self, which: Checkpoint) -> bool:
        return self.file(self.checkpoint_name(which)).exists()

    def save_checkpoint(self, which: Checkpoint, state: dict[str, Any]) -> Path:
        return save_checkpoint(self.file(self.checkpoint_name(which)), state)

    def load_checkpoint(
        self, which: Checkpoint, map_location: str | torch.device | None = "cpu"
    ) -> dict[str, Any] | None:
        """The checkpoint's state (``None`` when there is none), its tensors on ``map_location``.

        Checkpoints hold CPU copies wherever they were written, so one saved on a GPU loads on a CPU-only machine.

        Raises:
            DataError: only an older pickle ``last.pt`` exists (never unpickled), or the checkpoint is corrupt.
        """
        path = self.file(self.checkpoint_name(which))
        if path.exists():
            return load_checkpoint(path, map_location=map_location)
        legacy = self.file(LEGACY_LAST_CHECKPOINT)
        if which == "last" and legacy.exists():
            raise DataError(
                f"cannot resume from {str(legacy)!r}: it is a pickle (torch.save) checkpoint of an older embreg "
                "version, and pickle checkpoints are no longer loaded because unpickling can run arbitrary code. "
                f"Start the run afresh (without resume, or in a new directory); it will write {LAST_CHECKPOINT}"
            )
        return None

    def drop_checkpoints(self, keep: Literal["all", "best", "none"]) -> None:
        """Removes the checkpoints a finished run does not keep (``train.keep_checkpoints``)."""
        dropped: dict[str, tuple[Checkpoint, ...]] = {"none": ("best", "last"), "best": ("last",), "all": ()}
        for which in dropped[keep]:
            self.file(self.checkpoint_name(which)).unlink(missing_ok=True)


def _is_run_entry(entry: Path) -> bool:
    """A file a run writes, or a ``seed-<s>/`` directory holding one (not one that holds only a ``.lock``)."""
    if entry.name in RUN_ENTRIES:
        return True
    return bool(_SEED_DIR.fullmatch(entry.name)) and entry.is_dir() and bool(RunDirectory(entry).run_entries())


def _entry_name(entry: Path) -> str:
    return f"{entry.name}/" if entry.is_dir() and not entry.is_symlink() else entry.name


def run_status(files: RunDirectory) -> tuple[str, str | None]:
    """``(status, error)`` of the run in ``files``: ``finished``, ``training`` (unfinished) or ``failed``.

    ``run.json``'s ``status`` (:data:`RUN_STATUSES`) says it; a run whose ``run.json`` has none (an older version)
    is finished when its ``metrics.json`` holds :data:`~embreg.runs.run_layout.FINISHED_KEY`.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     run_status(RunDirectory(d))
        ('training', None)
    """
    record = files.read_run_record() or {}
    status = record.get("status")
    if status in RUN_STATUSES:
        return str(status), record.get("error")
    metrics = files.read_metrics()
    return ("finished" if metrics is not None and FINISHED_KEY in metrics else "training"), None

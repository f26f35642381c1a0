"""The run directory: the one module that knows its layout, and the only writer of its files.

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
``.lock``              present while a run writes here (:meth:`RunDirectory.lock`)
=====================  =============================================================================

A multi-seed run directory holds ``seed-<s>/`` run directories plus ``config.yaml``, ``summary.json`` (mean, std,
median, min, max and values of every metric) and ``report.md``. Every file is written atomically
(:mod:`embreg.train.checkpoint`); checkpoints are safetensors files whose loading never runs code. One run writes
into a directory at a time: :meth:`RunDirectory.lock` refuses a second one with
:class:`~embreg.errors.RunDirectoryLockedError` instead of letting their files interleave.

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
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import torch
import yaml

from embreg._locking import hold_lock
from embreg.errors import DataError, RunDirectoryLockedError
from embreg.train.checkpoint import atomic_write_json, atomic_write_text, load_checkpoint, save_checkpoint

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
    "RunDirectoryLockedError",
]

CONFIG = "config.yaml"
HISTORY = "history.jsonl"
METRICS = "metrics.json"
REPORT = "report.md"
SUMMARY = "summary.json"
LAST_CHECKPOINT = "last.safetensors"
BEST_CHECKPOINT = "best.safetensors"
LOCK = ".lock"
METRICS_CSV = "metrics.csv"
TENSORBOARD_DIR = "tensorboard"
LEGACY_LAST_CHECKPOINT = "last.pt"
"""Pickle checkpoints of older versions: recognised so a resume can refuse them clearly, never loaded."""

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

    # -- plain files ---------------------------------------------------------------------------------------------
    def write_config(self, config: Mapping[str, Any]) -> Path:
        return atomic_write_text(self.file(CONFIG), yaml.safe_dump(dict(config), sort_keys=False))

    def write_record(self, name: str, record: Mapping[str, Any]) -> Path:
        """A JSON record of the run's data (``split.json``, ``corpus.json``)."""
        if "/" in name or not name.endswith(".json"):
            raise ValueError(f"record name {name!r} must be a plain '*.json' file name")
        return atomic_write_json(self.file(name), dict(record))

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
        path = self.file(METRICS)
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

"""A study's run log: one JSON line per finished run, appended as runs finish (safe to interrupt).

Record fields (:class:`RunRecord`): ``study``, ``variant``, ``point`` (the reported grid's coordinates), ``phase``
(``tune`` or ``final``), ``setting`` (the tuned values this run used), ``seed``, ``overrides`` (every ``--set`` the
run had, in order, so the run can be repeated with ``embreg run RECIPE --set ...``), ``recipe``, ``metrics``
(``val_*``, ``test_*``, ``best_epoch``, ... as ``metrics.json`` holds them), ``seconds`` (wall time; a kept run read
back: the time it took when it was trained), ``machine``, ``finished`` (UTC time) and, for a final run the study
keeps (``keep_runs``), ``run_dir`` (its run directory under ``keep_runs``: relative to the directory the study ran
from when ``keep_runs`` is). ``key`` identifies a run for resuming: the same variant, point, phase, setting and
seed is never run twice.

Logs live beside their study file (``studies/logs/<name>.jsonl``) and are kept under version control, so every
number on a results page can be regenerated from them.

Example:
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     log = RunLog(pathlib.Path(d) / "demo.jsonl")
    ...     log.append(RunRecord("demo", "MF", {}, "final", {}, 0, ["train.seed=0"], "mf", {"test_rmse": 0.9}))
    ...     [r.metrics["test_rmse"] for r in log.read()], log.has(log.read()[0].key)
    ([0.9], True)
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from embreg.errors import DataError

__all__ = ["RunRecord", "RunLog", "run_key", "machine_record"]


def run_key(variant: str, point: dict[str, Any], phase: str, setting: dict[str, Any], seed: int) -> str:
    """The identity of a run within its study (a canonical JSON string)."""
    return json.dumps([variant, point, phase, setting, seed], sort_keys=True, default=str)


def machine_record() -> dict[str, Any]:
    """Where a run ran: platform, processor, CPU count, torch version, threads, GPU name (or ``None``)."""
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "gpu": gpu,
    }


@dataclass
class RunRecord:
    """One finished run (see the module docstring)."""

    study: str
    variant: str
    point: dict[str, Any]
    phase: Literal["tune", "final"]
    setting: dict[str, Any]
    seed: int
    overrides: list[str]
    recipe: str
    metrics: dict[str, Any]
    seconds: float = 0.0
    machine: dict[str, Any] = field(default_factory=dict)
    finished: str = ""
    run_dir: str | None = None

    @property
    def key(self) -> str:
        return run_key(self.variant, self.point, self.phase, self.setting, self.seed)

    def to_json(self) -> str:
        """One line of JSON; ``run_dir`` only where the run was kept, so logs of studies that keep nothing stay
        as they were (and readable by versions that do not know the field)."""
        data = dataclasses.asdict(self)
        if data["run_dir"] is None:
            del data["run_dir"]
        return json.dumps(data, sort_keys=True, default=str)


class RunLog:
    """Appends and reads the JSON-lines run log of one study."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> list[RunRecord]:
        """Every record, in the order written; a torn last line (an interrupted append) is ignored.

        Raises:
            DataError: a line other than the last is not a valid record (naming the file and line).
        """
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        names = {f.name for f in dataclasses.fields(RunRecord)}
        records = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                unknown = set(data) - names
                if unknown:
                    raise ValueError(f"unknown fields {sorted(unknown)}")
                records.append(RunRecord(**data))
            except (ValueError, TypeError) as exc:
                if number == len(lines):
                    break  # torn last line: the run is redone
                raise DataError(f"run log {self.path}, line {number}: not a run record ({exc})") from exc
        return records

    def keys(self) -> set[str]:
        return {record.key for record in self.read()}

    def has(self, key: str) -> bool:
        return key in self.keys()

    def drop_torn_tail(self) -> bool:
        """Cuts an unterminated last line (an append that was interrupted; its run is then redone); returns
        whether there was one. :meth:`read` ignores such a line, but an append after it would bury it mid-file.

        Example:
            >>> import tempfile, pathlib
            >>> with tempfile.TemporaryDirectory() as d:
            ...     path = pathlib.Path(d) / "demo.jsonl"
            ...     _ = path.write_text('{"study": "demo"')
            ...     RunLog(path).drop_torn_tail(), path.read_text()
            (True, '')
        """
        if not self.path.exists():
            return False
        data = self.path.read_bytes()
        if not data or data.endswith(b"\n"):
            return False
        with open(self.path, "r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)
        return True

    def append(self, record: RunRecord) -> None:
        """Appends one record as one line, flushed and synced (one writer per log at a time); a torn last line
        left by an interrupted append is cut first."""
        if not record.finished:
            record.finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.drop_torn_tail()
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(record.to_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())

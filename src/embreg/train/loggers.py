"""Experiment loggers (``train.log_to``): the run directory's numbers, also in TensorBoard, a CSV table or W&B.

Each logger receives every epoch record the trainer appends to ``history.jsonl`` (the same dictionaries, so the
same numbers) and, at the end, the run's ``metrics.json``. ``csv`` and ``tensorboard`` also record every
``train.log_every``-th optimizer step: its training loss (the task loss the step read back) and learning rate.

=================  ==================================================================================================
``csv``            ``<run_dir>/metrics.csv``: one row per epoch, one column per key (``epoch`` first, then the keys
                   in the order they first appear). The whole file is rewritten atomically from the trainer's history
                   after every epoch, so a key that appears later becomes a new column, a resumed run's table holds
                   its earlier epochs too, and a crash never leaves a half-written row. Floats are written with
                   Python's shortest round-trip form, so they read back equal to ``history.jsonl``'s.
                   Steps go to ``<run_dir>/steps.csv`` (``step,epoch,train_loss,lr``; one row per logged step,
                   appended; a resumed run first drops the rows from the step it resumes at on).
``tensorboard``    ``<run_dir>/tensorboard/``: one scalar per numeric key with ``step = epoch``; the final metrics
                   as ``final/<key>`` at the best epoch. A resumed run writes its whole history again and purges the
                   earlier steps (``SummaryWriter(purge_step=...)``), so TensorBoard shows each epoch once. Needs the
                   ``tensorboard`` package (``pip install 'embreg[log]'``). Steps go to a run of their own,
                   ``<run_dir>/tensorboard/steps/`` (``train_loss`` and ``lr`` with ``step`` = the optimizer step).
``wandb``          a Weights & Biases run (project ``$WANDB_PROJECT``, default ``embreg``; its files under
                   ``<run_dir>/wandb``; the resolved recipe as its config): ``log(record, step=epoch)`` per epoch,
                   the final metrics in its summary. ``<run_dir>/wandb.json`` keeps the W&B run's id and the last
                   epoch it got, so ``--resume`` continues the same W&B run (``resume="allow"``) with the epochs it
                   lacks. Needs ``pip install wandb`` and a W&B login (or ``WANDB_MODE=offline``).
=================  ==================================================================================================

Loggers are extras: a logger that fails (to start or to write) is disabled with one :class:`LoggerWarning` and
the run goes on; the run directory's own files are written by :class:`~embreg.runs.run_dir.RunDirectory` alone,
before the loggers are called, so a logger can never lose or change them. A run without a run directory
(``out_dir=None``) has nowhere to log, so its loggers are skipped with a warning.

Example:
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     loggers = build_loggers(["csv"], d)
    ...     history = [{"epoch": 0, "train_loss": 0.5, "val_rmse": 1.0}]
    ...     loggers.log_epoch(history[0], history)
    ...     loggers.close()
    ...     print(pathlib.Path(d, "metrics.csv").read_text().strip())
    epoch,train_loss,val_rmse
    0,0.5,1.0
"""

from __future__ import annotations

import csv
import difflib
import importlib.util
import io
import json
import os
import sys
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from embreg.errors import ConfigError
from embreg.runs.checkpoint import atomic_write_json, atomic_write_text
from embreg.runs.run_dir import METRICS_CSV, TENSORBOARD_DIR

__all__ = [
    "LOGGER_NAMES",
    "LoggerWarning",
    "MetricLogger",
    "CSVLogger",
    "TensorBoardLogger",
    "WandbLogger",
    "RunLoggers",
    "build_loggers",
    "check_logger_names",
    "STEPS_CSV",
]

STEPS_CSV = "steps.csv"
"""The CSV logger's per-step table in the run directory."""

STEP_COLUMNS = ("step", "epoch", "train_loss", "lr")

LOGGER_NAMES = ("tensorboard", "csv", "wandb")
"""The names ``train.log_to`` accepts."""

_PACKAGES = {
    "tensorboard": ("tensorboard", "pip install 'embreg[log]'  (or: pip install tensorboard)"),
    "wandb": ("wandb", "pip install wandb"),
}


class LoggerWarning(UserWarning):
    """A logger was skipped or disabled; the run itself goes on unaffected."""


def _installed(module: str) -> bool:
    if module in sys.modules:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_logger_names(names: Sequence[str], *, key: str = "train.log_to") -> None:
    """Checks a ``train.log_to`` list: known names, each once, with the packages they need installed.

    Raises:
        ConfigError: an unknown or repeated name (naming the valid ones), or a logger whose package is missing
            (with the pip command that installs it).

    Example:
        >>> check_logger_names(["csv"])
        >>> check_logger_names(["tensorbord"])
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: train.log_to: unknown logger 'tensorbord'; did you mean 'tensorboard'? Valid loggers: tensorboard, csv, wandb
    """
    seen: set[str] = set()
    for name in names:
        if name not in LOGGER_NAMES:
            close = difflib.get_close_matches(str(name), LOGGER_NAMES, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{key}: unknown logger {name!r}{hint} Valid loggers: {', '.join(LOGGER_NAMES)}")
        if name in seen:
            raise ConfigError(f"{key}: logger {name!r} is listed twice")
        seen.add(name)
        if name in _PACKAGES:
            module, command = _PACKAGES[name]
            if not _installed(module):
                raise ConfigError(
                    f"{key}: logger {name!r} needs the {module!r} package, which is not installed: {command}"
                )


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a real number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class MetricLogger(ABC):
    """One logger: ``log_epoch`` after every epoch, ``log_final`` once with the run's metrics, then ``close``."""

    name = "logger"

    @abstractmethod
    def log_epoch(self, record: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> None:
        """Logs ``record``, the newest entry of ``history`` (the whole history of the run so far)."""

    def log_final(self, metrics: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook, empty by default
        """Logs the run's final metrics (``metrics.json``)."""

    def log_step(self, record: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook, empty by default
        """Logs one optimizer step's record (``step``, ``epoch``, ``train_loss``, ``lr``)."""

    def close(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Flushes and releases what the logger holds."""


class CSVLogger(MetricLogger):
    """``<run_dir>/metrics.csv``: the history as a wide table, rewritten atomically after every epoch.

    Args:
        run_dir: the run directory.
    """

    name = "csv"

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / METRICS_CSV
        self.steps_path = Path(run_dir) / STEPS_CSV
        self._steps: Any = None

    def log_step(self, record: Mapping[str, Any]) -> None:
        if self._steps is None:
            # a resumed run starts again at ``record["step"]``: rows from there on belonged to the lost epoch
            kept: list[str] = []
            if self.steps_path.exists():
                lines = self.steps_path.read_text().splitlines()[1:]
                kept = [line for line in lines if line and int(line.split(",", 1)[0]) < int(record["step"])]
            atomic_write_text(self.steps_path, "".join(line + "\n" for line in [",".join(STEP_COLUMNS), *kept]))
            self._steps = self.steps_path.open("a", newline="")
        self._steps.write(",".join(_cell(record.get(key)) for key in STEP_COLUMNS) + "\n")
        self._steps.flush()

    def close(self) -> None:
        if self._steps is not None:
            self._steps.close()
            self._steps = None

    def log_epoch(self, record: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> None:
        columns = ["epoch"]
        for row in history:
            columns += [key for key in row if key not in columns]
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in history:
            writer.writerow([_cell(row.get(key)) for key in columns])
        atomic_write_text(self.path, out.getvalue())


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (bool, int, float, str)):
        return repr(value) if isinstance(value, float) else str(value)
    return json.dumps(value)


class TensorBoardLogger(MetricLogger):
    """``<run_dir>/tensorboard/``: a scalar per numeric key of each epoch record, ``step = epoch``.

    Args:
        run_dir: the run directory.
    """

    name = "tensorboard"

    def __init__(self, run_dir: str | Path) -> None:
        self.log_dir = Path(run_dir) / TENSORBOARD_DIR
        self._writer: Any = None
        self._steps: Any = None

    def log_step(self, record: Mapping[str, Any]) -> None:
        if self._steps is None:
            from torch.utils.tensorboard import SummaryWriter

            # a run of its own: purge_step counts optimizer steps here and epochs in the epoch writer
            self._steps = SummaryWriter(str(self.log_dir / "steps"), purge_step=int(record["step"]))
        for key in ("train_loss", "lr"):
            self._steps.add_scalar(key, float(record[key]), global_step=int(record["step"]))

    def log_epoch(self, record: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> None:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            # The first call of this process writes the whole history: a resumed run's earlier epochs are written
            # again and purge_step hides what an earlier process wrote from that step on.
            first = int(history[0]["epoch"]) if len(history) > 1 else None
            self._writer = SummaryWriter(str(self.log_dir), purge_step=first)
            pending: Sequence[Mapping[str, Any]] = history
        else:
            pending = [record]
        for row in pending:
            step = int(row["epoch"])
            for key, value in row.items():
                number = _number(value)
                if key != "epoch" and number is not None:
                    self._writer.add_scalar(key, number, global_step=step)
        self._writer.flush()

    def log_final(self, metrics: Mapping[str, Any]) -> None:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(self.log_dir))
        step = int(metrics.get("best_epoch", 0) or 0)
        for key, value in metrics.items():
            number = _number(value)
            if number is not None:
                self._writer.add_scalar(f"final/{key}", number, global_step=step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._steps is not None:
            self._steps.close()
            self._steps = None


class WandbLogger(MetricLogger):
    """A Weights & Biases run: each epoch record logged at ``step = epoch``; the final metrics in its summary.

    Args:
        run_dir: the run directory (W&B keeps its files in ``<run_dir>/wandb``).
        run_name: the W&B run's name.
        config: the W&B run's config (the resolved recipe).
    """

    name = "wandb"

    def __init__(self, run_dir: str | Path, run_name: str = "", config: Mapping[str, Any] | None = None) -> None:
        self.run_dir, self.run_name, self.config = Path(run_dir), run_name, dict(config or {})
        self._run: Any = None
        self._last_epoch = -1  # the last epoch the W&B run holds

    @property
    def _state_path(self) -> Path:
        return self.run_dir / "wandb.json"

    def _start(self) -> Any:
        if self._run is None:
            import wandb

            self.run_dir.mkdir(parents=True, exist_ok=True)
            saved = self._saved()
            resume = {"id": saved["id"], "resume": "allow"} if saved else {}
            self._run = wandb.init(
                project=os.environ.get("WANDB_PROJECT", "embreg"),
                name=self.run_name or None,
                dir=str(self.run_dir),
                config=self.config,
                **resume,
            )
            self._last_epoch = int(saved.get("last_epoch", -1)) if saved else -1
            self._save()
        return self._run

    def _saved(self) -> dict[str, Any]:
        try:
            saved = json.loads(self._state_path.read_text())
        except (OSError, ValueError):
            return {}
        return saved if isinstance(saved, dict) and isinstance(saved.get("id"), str) else {}

    def _save(self) -> None:
        run_id = getattr(self._run, "id", None)
        if isinstance(run_id, str):
            atomic_write_json(self._state_path, {"id": run_id, "last_epoch": self._last_epoch})

    def log_epoch(self, record: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> None:
        run = self._start()
        # the epochs the W&B run lacks: all of a resumed run's history for a new W&B run, the new ones for a resumed one
        for row in history:
            if int(row["epoch"]) <= self._last_epoch:
                continue
            numbers = {k: n for k, v in row.items() if k != "epoch" and (n := _number(v)) is not None}
            run.log(numbers, step=int(row["epoch"]))
            self._last_epoch = int(row["epoch"])
        self._save()

    def log_final(self, metrics: Mapping[str, Any]) -> None:
        self._start().summary.update({k: v for k, v in metrics.items() if _number(v) is not None or isinstance(v, str)})

    def close(self) -> None:
        if self._run is not None:
            self._run.finish()
            self._run = None


class RunLoggers:
    """The loggers of one run, and the trainer callback that feeds them (``callbacks=[loggers]``).

    Every call into a logger is guarded: the first exception disables that logger with one :class:`LoggerWarning`
    naming it and the error; the others and the run go on. Usable as a context manager that closes the loggers.

    Args:
        loggers: the loggers (each opens its writer or W&B run on its first call, so a failing start is
            guarded too).
        log_every: the loggers get every ``log_every``-th optimizer step (``train.log_every``).
    """

    def __init__(self, loggers: Sequence[MetricLogger] = (), log_every: int = 50) -> None:
        if isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1:
            raise ConfigError(f"train.log_every={log_every!r} must be an integer >= 1")
        self.loggers = list(loggers)
        self.log_every = log_every
        self.failed: dict[str, str] = {}

    def __bool__(self) -> bool:
        return bool(self.loggers)

    def __enter__(self) -> RunLoggers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __call__(self, trainer: Any, record: dict[str, Any]) -> None:
        """The trainer's epoch callback: logs ``record`` with the trainer's history."""
        self.log_epoch(record, getattr(trainer, "history", [record]))

    def callbacks(self) -> list[Callable[[Any, dict[str, Any]], None]]:
        """``[self]`` when there is a logger, else ``[]`` (for ``Trainer(callbacks=...)``)."""
        return [self] if self.loggers else []

    def step_callbacks(self) -> list[Callable[[Any, dict[str, Any]], None]]:
        """``[self.step_callback]`` when a logger records steps, else ``[]`` (for ``Trainer(step_callbacks=...)``)."""
        stepped = [logger for logger in self.loggers if type(logger).log_step is not MetricLogger.log_step]
        return [self.step_callback] if stepped else []

    def step_callback(self, trainer: Any, record: dict[str, Any]) -> None:
        """The trainer's step callback: passes on every ``log_every``-th step (``record["step"]`` counts from 1)."""
        if int(record["step"]) % self.log_every == 0:
            self.log_step(record)

    def log_step(self, record: Mapping[str, Any]) -> None:
        for logger in self._active():
            self._guard(logger, logger.log_step, record)

    def log_epoch(self, record: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> None:
        for logger in self._active():
            self._guard(logger, logger.log_epoch, record, history)

    def log_final(self, metrics: Mapping[str, Any]) -> None:
        for logger in self._active():
            self._guard(logger, logger.log_final, metrics)

    def close(self) -> None:
        for logger in self._active():
            self._guard(logger, logger.close)

    def _active(self) -> list[MetricLogger]:
        return [logger for logger in self.loggers if logger.name not in self.failed]

    def _guard(self, logger: MetricLogger, call: Callable[..., None], *args: Any) -> None:
        try:
            call(*args)
        except Exception as error:  # a logger is an extra: its failure must never end or change the run
            self.failed[logger.name] = f"{type(error).__name__}: {error}"
            warnings.warn(
                f"the {logger.name} logger failed and is disabled for the rest of this run; the run directory's "
                f"files are unaffected. Reason: {self.failed[logger.name][:300]}",
                LoggerWarning,
                stacklevel=3,
            )
            try:
                logger.close()
            except Exception:  # already disabled and reported
                pass


def build_loggers(
    names: Sequence[str],
    run_dir: str | Path | None,
    *,
    run_name: str = "",
    config: Mapping[str, Any] | None = None,
    log_every: int = 50,
) -> RunLoggers:
    """The loggers ``names`` (``train.log_to``) of a run writing into ``run_dir``.

    Args:
        names: logger names, see :data:`LOGGER_NAMES`.
        run_dir: the run directory; ``None`` skips every logger with a :class:`LoggerWarning`.
        run_name: a name for loggers that show one (W&B).
        config: the resolved recipe, for loggers that record it (W&B).
        log_every: loggers that record steps (``csv``, ``tensorboard``) get every ``log_every``-th one.

    Raises:
        ConfigError: as :func:`check_logger_names`.
    """
    check_logger_names(names)
    if not names:
        return RunLoggers()
    if run_dir is None:
        warnings.warn(
            f"train.log_to={list(names)} is ignored: this run has no run directory to log into (out_dir=None)",
            LoggerWarning,
            stacklevel=2,
        )
        return RunLoggers()
    factories: dict[str, Callable[[], MetricLogger]] = {
        "csv": lambda: CSVLogger(run_dir),
        "tensorboard": lambda: TensorBoardLogger(run_dir),
        "wandb": lambda: WandbLogger(run_dir, run_name, config),
    }
    return RunLoggers([factories[name]() for name in names], log_every=log_every)

"""What serving checks of a run directory before it uses the run (:func:`embreg.serving.load`).

* **One seed.** ``embreg run --seeds N`` trains into ``seed-<s>/`` folders; serving uses one of them, picked with
  ``--seed S`` (``seed=S``) or named directly (:func:`select_run`). Without a seed, a multi-seed directory is
  refused with its seeds listed; a seed on a single-seed run, or a seed the run lacks, is refused too.
* **A finished run.** ``run.json`` holds the run's ``status`` (:data:`embreg.runs.run_dir.RUN_STATUSES`):
  ``training`` until the runner writes the final ``metrics.json``, then ``finished``; ``failed`` when training
  raised (loss or weights not finite, final metrics not finite). A run of an older version without a status is
  finished when its ``metrics.json`` holds the runner's :data:`~embreg.runs.run_layout.FINISHED_KEY`. An unfinished
  run (still training, or stopped before its end) is refused unless ``allow_unfinished`` (``--allow-unfinished``),
  a failed one unless ``allow_failed`` (``--allow-failed``); served anyway, a warning names the epoch its
  checkpoint holds (:func:`check_run_status`).
* **The config as trained.** ``run.json`` also holds the resolved config the run trained with; ``config.yaml`` may
  differ from it only in the keys a resume may change (:data:`embreg.recipes.resume_check.SAFE_TO_CHANGE`: device,
  precision, threads, progress, loggers, kept checkpoints, the sweep space), which change neither the model nor its
  data. Any other edit (``model.pooling``, ``data.max_length``, ``train.epochs`` ...) is refused naming each key
  with both values (:func:`check_config_as_trained`): the model would be rebuilt as the edited file says, not as
  it was trained. Runs written before ``run.json`` held a config are served without this check.

Example:
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     (pathlib.Path(d) / "seed-0").mkdir()
    ...     (pathlib.Path(d) / "seed-1").mkdir()
    ...     select_run(d, 1).name
    'seed-1'
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embreg.errors import ConfigError, DataError
from embreg.runs.run_dir import RunDirectory, run_status

__all__ = [
    "UnservableRunError",
    "UnfinishedRunWarning",
    "seed_folders",
    "select_run",
    "run_status",
    "check_run_status",
    "check_config_as_trained",
    "checkpoint_epoch",
]

_SEED_DIR = re.compile(r"seed-(\d+)")


class UnservableRunError(DataError):
    """The run is unfinished or failed; serving it needs ``allow_unfinished`` / ``allow_failed``."""


class UnfinishedRunWarning(UserWarning):
    """An unfinished or failed run is served, as ``allow_unfinished`` / ``allow_failed`` asked."""


def seed_folders(path: str | Path) -> list[int]:
    """The seeds of the ``seed-<s>/`` folders in ``path``, ascending (``[]`` for a single-seed run)."""
    folder = Path(path)
    if not folder.is_dir():
        return []
    found = (_SEED_DIR.fullmatch(p.name) for p in folder.iterdir() if p.is_dir())
    return sorted(int(match.group(1)) for match in found if match)


def select_run(path: str | Path, seed: int | None) -> Path:
    """The single-seed run directory to serve: ``path`` itself, or its ``seed-<seed>/`` folder.

    Args:
        path: a run directory, single- or multi-seed.
        seed: the seed folder of a multi-seed run (``None`` for a single-seed run).

    Raises:
        DataError: ``path`` does not exist; a multi-seed run without ``seed`` (the message lists its seeds); a
            ``seed`` the run lacks; a ``seed`` given for a single-seed run.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise DataError(f"run directory {str(folder)!r} does not exist")
    seeds = seed_folders(folder)
    listed = ", ".join(f"seed-{s}" for s in seeds)
    multi = bool(seeds) or (RunDirectory(folder).read_run_record() or {}).get("layout") == "seeds"
    if seed is None:
        if multi and not seeds:
            raise DataError(f"{str(folder)!r} holds a multi-seed run whose first seed has not started yet")
        if multi:
            raise DataError(
                f"{str(folder)!r} holds a multi-seed run ({listed}); pick one with --seed S (Python: seed=S), "
                f"e.g. --seed {seeds[0]}"
            )
        return folder
    if not multi:
        raise DataError(f"{str(folder)!r} is a single-seed run, not a multi-seed one; leave out --seed (seed=)")
    if seed not in seeds:
        raise DataError(f"{str(folder)!r} has no seed {seed}; its seed folders are {listed or 'none yet'}")
    return folder / f"seed-{seed}"


def checkpoint_epoch(state: Mapping[str, Any]) -> int | None:
    """The epoch (counted from 0) whose weights a checkpoint holds: ``epoch`` of ``best.safetensors``, the last
    finished epoch of ``last.safetensors``, the last averaged epoch of ``averaged.safetensors``."""
    if state.get("epoch") is not None:
        return int(state["epoch"])
    if state.get("next_epoch") is not None:
        return int(state["next_epoch"]) - 1
    epochs = state.get("epochs")
    if isinstance(epochs, (list, tuple)) and epochs:
        return int(max(epochs))
    return None


def check_run_status(
    files: RunDirectory,
    config: Mapping[str, Any],
    checkpoint: Path,
    epoch: int | None,
    *,
    allow_unfinished: bool = False,
    allow_failed: bool = False,
) -> None:
    """Refuses an unfinished or failed run unless allowed; served anyway, it warns naming the checkpoint's epoch.

    Args:
        files: the run directory.
        config: its config (``train.epochs`` for the message).
        checkpoint: the checkpoint file to serve.
        epoch: the epoch it holds (counted from 0; ``None``: there is no such file).
        allow_unfinished, allow_failed: serve such a run anyway.

    Raises:
        UnservableRunError: naming the state, the epoch and the flag that serves it anyway.

    Warns:
        UnfinishedRunWarning: an allowed unfinished or failed run is served.
    """
    status, error = run_status(files)
    if status == "finished":
        return
    epochs = config.get("train", {}).get("epochs")
    if epoch is None:
        holds = f"no epoch has finished yet (there is no {checkpoint.name})"
    else:
        holds = f"its {checkpoint.name} holds epoch {epoch} (counted from 0, of train.epochs={epochs})"
    if status == "failed":
        state = f"failed ({error})" if error else "failed"
        if not allow_failed:
            raise UnservableRunError(
                f"run {str(files.path)!r} {state}: {holds}. Serve it anyway with --allow-failed (allow_failed=True)"
            )
    else:
        state = "unfinished (still training, or stopped before its end)"
        if not allow_unfinished:
            raise UnservableRunError(
                f"run {str(files.path)!r} is {state}: {holds}. Finish it with 'embreg run ... --resume' into the same "
                "--out, or serve it anyway with --allow-unfinished (allow_unfinished=True)"
            )
    if epoch is not None:
        verb = "" if status == "failed" else "is "
        warnings.warn(
            f"serving run {str(files.path)!r}, which {verb}{state}: {holds}", UnfinishedRunWarning, stacklevel=3
        )


def check_config_as_trained(files: RunDirectory, config: Mapping[str, Any]) -> None:
    """Refuses a ``config.yaml`` edited after training in a key that changes the model or its data.

    Raises:
        ConfigError: naming each such key with its trained and its present value.
    """
    from embreg.recipes.resume_check import SAFE_TO_CHANGE, config_differences, safe_to_change

    trained = (files.read_run_record() or {}).get("config")
    if not isinstance(trained, Mapping):
        return
    edited = [(key, old, new) for key, old, new in config_differences(trained, config) if not safe_to_change(key)]
    if not edited:
        return
    shown = "; ".join(f"{key}: {old!r} when trained, {new!r} now" for key, old, new in edited)
    raise ConfigError(
        f"{str(files.file('config.yaml'))!r} was edited after training ({shown}); the model would be rebuilt as the "
        f"edited file says, not as it was trained. Put back the trained values (run.json holds the config as "
        f"trained); only {', '.join(SAFE_TO_CHANGE)} may differ"
    )

"""Weights kept at chosen epochs of a run, for checkpoint averaging and snapshot ensembles.

Two training practices of nlp-best-practices.txt ("Ensembling") need the weights of a run at more epochs than its
best and last:

* **checkpoint averaging** (``train.average_checkpoints: K``): the element-wise mean of the weights of the last K
  epochs, one model (Vaswani et al. 2017 average the last 5 checkpoints); :func:`average_states`.
* **snapshot ensembles** (``train.snapshot_ensemble: true`` with ``train.schedule: cosine-restarts``; Huang et al.
  2017): the weights at the end of each cosine cycle (:func:`embreg.optim.schedules.cycle_end_epochs`), whose
  predictions are averaged (:class:`embreg.models.ensemble.PredictionEnsemble`).

:class:`EpochSnapshots` is the trainer callback that keeps them: after each epoch it writes the model's weights to
``<run_dir>/snapshots/epoch-<e>.safetensors`` (the safetensors checkpoint format of
:mod:`embreg.runs.checkpoint`: nothing is unpickled on loading) and deletes those no longer wanted, so at most K
plus the cycle ends are on disk, and a resumed run finds the ones written before it stopped. Without a run
directory they are kept in memory.

Example:
    >>> import torch
    >>> a = {"w": torch.tensor([1.0, 3.0]), "n": torch.tensor(1)}
    >>> b = {"w": torch.tensor([3.0, 5.0]), "n": torch.tensor(2)}
    >>> average_states([a, b])
    {'w': tensor([2., 4.]), 'n': tensor(2)}
"""

from __future__ import annotations

import copy
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from embreg.errors import ConfigError, DataError
from embreg.optim.schedules import SCHEDULE_SETTINGS, cycle_end_epochs
from embreg.runs.checkpoint import load_checkpoint, save_checkpoint

__all__ = [
    "SNAPSHOT_DIR",
    "EpochSnapshots",
    "average_states",
    "check_ensemble_settings",
    "ensemble_metric_names",
    "schedule_settings",
    "snapshot_cycle_ends",
]

SNAPSHOT_DIR = "snapshots"
"""The folder of a run directory that holds the kept epochs' weights."""
_FILE = re.compile(r"epoch-(\d+)\.safetensors")


def schedule_settings(train: Any) -> dict[str, Any]:
    """The :data:`~embreg.optim.schedules.SCHEDULE_SETTINGS` values of a ``train`` section."""
    return {key: getattr(train, key) for key in SCHEDULE_SETTINGS}


def snapshot_cycle_ends(train: Any) -> list[int]:
    """The epochs whose weights a snapshot ensemble keeps (``[]`` when ``train.snapshot_ensemble`` is off)."""
    if not train.snapshot_ensemble:
        return []
    return cycle_end_epochs(train.restart_epochs, train.restart_mult or 1, train.epochs)


def check_ensemble_settings(train: Any) -> None:
    """Refuses ``average_checkpoints`` outside ``[1, epochs]`` and a snapshot ensemble without warm restarts or
    with fewer than two cycles within ``train.epochs``.

    Raises:
        ConfigError: naming the setting and what to set.
    """
    k = train.average_checkpoints
    if k is not None and not 1 <= k <= train.epochs:
        raise ConfigError(f"train.average_checkpoints={k} must be in [1, train.epochs={train.epochs}] or null")
    if not train.snapshot_ensemble:
        return
    if train.schedule != "cosine-restarts":
        raise ConfigError(
            f"train.snapshot_ensemble=true keeps a snapshot at the end of each cosine cycle, and train.schedule="
            f"{train.schedule!r} has no cycles; set train.schedule=cosine-restarts with train.restart_epochs"
        )
    if train.restart_epochs is None:
        return  # the schedule check names the missing restart period
    ends = snapshot_cycle_ends(train)
    if len(ends) < 2:
        raise ConfigError(
            f"train.snapshot_ensemble=true needs at least two cosine cycles within train.epochs={train.epochs}, "
            f"and train.restart_epochs={train.restart_epochs} (restart_mult={train.restart_mult or 1}) gives "
            f"{len(ends)}; lower train.restart_epochs or raise train.epochs"
        )


def average_states(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The element-wise mean of floating-point tensors over ``states``; other entries (integer buffers, counters,
    extra states) are taken from the last state.

    Raises:
        ValueError: no states, or states with different keys or shapes.
    """
    if not states:
        raise ValueError("no states to average")
    keys = list(states[-1])
    if any(list(state) != keys for state in states):
        raise ValueError("the states to average hold different keys")
    averaged: dict[str, Any] = {}
    for key in keys:
        values = [state[key] for state in states]
        last = values[-1]
        if isinstance(last, torch.Tensor) and last.is_floating_point():
            if any(v.shape != last.shape for v in values):
                raise ValueError(f"the states to average hold {key!r} in different shapes")
            total = torch.stack([v.detach().to(torch.float64) for v in values]).mean(dim=0)
            averaged[key] = total.to(last.dtype)
        else:
            averaged[key] = last
    return averaged


class EpochSnapshots:
    """Trainer callback keeping the model's weights of the last ``keep_last`` epochs and of ``epochs``.

    Args:
        run_dir: the run directory (``None``: keep them in memory).
        keep_last: how many of the latest epochs to keep (0: none).
        epochs: 0-based epochs always kept (a snapshot ensemble's cycle ends).

    Example:
        >>> snapshots = EpochSnapshots(None, keep_last=2)
        >>> class T:
        ...     model = torch.nn.Linear(1, 1)
        >>> for epoch in range(3):
        ...     snapshots(T(), {"epoch": epoch})
        >>> snapshots.epochs()
        [1, 2]
    """

    def __init__(self, run_dir: str | Path | None, *, keep_last: int = 0, epochs: Sequence[int] = ()) -> None:
        self.directory = Path(run_dir) / SNAPSHOT_DIR if run_dir is not None else None
        self.keep_last = keep_last
        self.always = frozenset(epochs)
        self._memory: dict[int, dict[str, Any]] = {}

    def __call__(self, trainer: Any, record: dict[str, Any]) -> None:
        dist = getattr(trainer, "dist", None)
        if dist is not None and not dist.is_main:
            return  # under DDP rank 0 alone writes the run directory
        epoch = int(record["epoch"])
        if self.keep_last > 0 or epoch in self.always:
            state = {
                k: v.detach().cpu().clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v)
                for k, v in trainer.model.state_dict().items()
            }
            if self.directory is None:
                self._memory[epoch] = state
            else:
                save_checkpoint(self.directory / f"epoch-{epoch}.safetensors", {"model": state, "epoch": epoch})
        for old in self.epochs():
            if old not in self.always and old <= epoch - self.keep_last:
                self._drop(old)

    def _drop(self, epoch: int) -> None:
        if self.directory is None:
            self._memory.pop(epoch, None)
        else:
            (self.directory / f"epoch-{epoch}.safetensors").unlink(missing_ok=True)

    def epochs(self) -> list[int]:
        """The kept epochs, in order."""
        if self.directory is None:
            return sorted(self._memory)
        if not self.directory.is_dir():
            return []
        found = (_FILE.fullmatch(p.name) for p in self.directory.iterdir())
        return sorted(int(m.group(1)) for m in found if m)

    def state(self, epoch: int) -> dict[str, Any]:
        """The model weights kept for ``epoch``.

        Raises:
            DataError: none is kept for that epoch (or its file is corrupt).
        """
        if self.directory is None:
            if epoch not in self._memory:
                raise DataError(f"no snapshot of epoch {epoch} is kept (kept: {self.epochs()})")
            return self._memory[epoch]
        path = self.directory / f"epoch-{epoch}.safetensors"
        if not path.is_file():
            raise DataError(f"no snapshot of epoch {epoch}: {str(path)!r} does not exist (kept: {self.epochs()})")
        return dict(load_checkpoint(path, map_location="cpu")["model"])

    def last(self, k: int, before: int) -> list[int]:
        """The kept epochs among the ``k`` epochs before epoch ``before`` (0-based, exclusive)."""
        return [e for e in self.epochs() if before - k <= e < before]

    def drop_all(self) -> None:
        """Removes every kept snapshot (``train.keep_checkpoints: none``)."""
        self._memory.clear()
        if self.directory is not None and self.directory.is_dir():
            shutil.rmtree(self.directory)


def ensemble_metric_names(train: Any, evaluated: tuple[str, ...]) -> tuple[str, ...]:
    """The keys :func:`embreg.recipes.ensembles.ensemble_metrics` can add for a ``train`` section, given the task's evaluated metrics.

    Example:
        >>> from embreg.recipes import load_recipe
        >>> ensemble_metric_names(load_recipe("mf", ["train.average_checkpoints=3"]).train, ("rmse",))
        ('averaged_epochs', 'averaged_val_rmse', 'averaged_test_rmse')
    """
    names: list[str] = []
    for prefix, counter, wanted in (
        ("averaged", "averaged_epochs", bool(train.average_checkpoints)),
        ("snapshots", "snapshots_count", bool(train.snapshot_ensemble)),
    ):
        if wanted:
            names += [counter, *(f"{prefix}_{split}_{name}" for split in ("val", "test") for name in evaluated)]
    return tuple(names)

"""Ensembles of trained runs: independently seeded models (``--seeds N``), snapshots, or several recipes on one
data set, averaged as one model (``embreg.load_ensemble``, ``embreg ensemble``).

nlp-best-practices.txt ("Ensembling"): averaging the predictions of independently trained models is the
document's first ensembling practice. :func:`load_ensemble` loads each run with :func:`embreg.serving.load` and
wraps their models in a :class:`~embreg.models.ensemble.PredictionEnsemble` (probabilities averaged for
classification and clicks, scores for ranking and next-item, ratings and values as they are). A multi-seed run
directory stands for all of its seeds; ``snapshots=True`` takes, for each run, the weights it kept at the end of its
cosine cycles (``train.snapshot_ensemble``). :meth:`Ensemble.evaluate` scores the ensemble with the task's own
evaluator on a split of the runs' data, beside each member's score; :attr:`Ensemble.run` is a
:class:`~embreg.serving.trained_run.TrainedRun` whose model is the ensemble, so ``predict``, ``recommend`` and
``score`` serve it as they serve one run.

The runs must be of one task and one data set: the same task, the same ``data`` section, the same records of the
prepared data (``split.json`` / ``corpus.json``) and the very same prepared tensors (ids, tokens), so every member
reads the batches the ensemble is given as it read its own. Models and training settings may differ (an ensemble
of different models on one data set is the document's practice too).

Example:
    >>> import tempfile
    >>> from embreg.recipes import load_recipe
    >>> from embreg.recipes.run import run_single
    >>> d = tempfile.mkdtemp()
    >>> _ = run_single(load_recipe("mf", ["data.max_rows=500", "train.epochs=1", "train.progress=false"]), d)
    >>> ensemble = load_ensemble([d, d])
    >>> round(ensemble.evaluate("test")["rmse"] - ensemble.member_metrics("test")[0]["rmse"], 6)
    0.0
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embreg.config import to_dict
from embreg.errors import ConfigError, DataError
from embreg.models.ensemble import PredictionEnsemble, combine_for_task
from embreg.serving.loading import load
from embreg.serving.trained_run import TrainedRun
from embreg.train.snapshots import EpochSnapshots

__all__ = ["Ensemble", "load_ensemble", "run_directories", "data_fingerprint", "check_same_data", "report_table"]

_SEED_DIR = re.compile(r"seed-(\d+)")


def run_directories(paths: Sequence[str | Path]) -> list[Path]:
    """The single-seed run directories ``paths`` name: a multi-seed directory stands for its ``seed-<s>/``
    directories (in seed order), a single run for itself.

    Raises:
        DataError: a path that does not exist.
    """
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            raise DataError(f"run directory {str(path)!r} does not exist")
        seeds = [p for p in path.iterdir() if p.is_dir() and _SEED_DIR.fullmatch(p.name)]
        if seeds:  # a multi-seed run: its seeds (a single run holds no seed-<s>/)
            found += sorted(seeds, key=lambda p: int(_SEED_DIR.fullmatch(p.name).group(1)))  # type: ignore[union-attr]
        else:
            found.append(path)
    return found


def data_fingerprint(prepared: Any, *, depth: int = 4) -> str:
    """A sha256 of every tensor and array in the task's prepared data (dicts, lists, tuples and object attributes,
    ``depth`` levels down): equal for data prepared alike, ids and tokens included.

    Example:
        >>> data_fingerprint({"x": torch.arange(3)}) == data_fingerprint({"x": torch.arange(3)})
        True
        >>> data_fingerprint({"x": torch.arange(3)}) == data_fingerprint({"x": torch.arange(4)})
        False
    """
    digest = hashlib.sha256()

    def visit(value: Any, where: str, level: int) -> None:
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().contiguous().numpy()
        if isinstance(value, np.ndarray):
            digest.update(f"{where}:{value.dtype}:{value.shape}".encode())
            if value.dtype != object:
                digest.update(np.ascontiguousarray(value).tobytes())
            return
        if level >= depth:
            return
        if isinstance(value, dict):
            for key in sorted(value, key=str):
                visit(value[key], f"{where}.{key}", level + 1)
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value[:10000]):
                visit(item, f"{where}[{i}]", level + 1)
        elif dataclasses.is_dataclass(value) or hasattr(value, "__dict__"):
            for key, item in sorted(vars(value).items()):
                if not key.startswith("__"):
                    visit(item, f"{where}.{key}", level + 1)

    visit(prepared, "", 0)
    return digest.hexdigest()


def check_same_data(runs: Sequence[TrainedRun], what: str = "an ensemble") -> None:
    """Refuses runs of different tasks or data (see the module docstring), naming the first run that differs.

    Raises:
        ConfigError: another task, another ``data`` section or other prepared data (records or tensors).
    """
    first = runs[0]
    for run in runs[1:]:
        where = f"{what} needs runs of one task and one data set: {str(run.path)!r}"
        if run.task != first.task:
            raise ConfigError(f"{where} is a {run.task!r} run, {str(first.path)!r} a {first.task!r} run")
        ours, theirs = to_dict(first.recipe.data), to_dict(run.recipe.data)
        if ours != theirs:
            keys = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
            shown = ", ".join(f"data.{k}: {theirs.get(k)!r} vs {ours.get(k)!r}" for k in keys)
            raise ConfigError(f"{where} has another data section than {str(first.path)!r} ({shown})")
        if data_fingerprint(run.prepared) != data_fingerprint(first.prepared):
            raise ConfigError(
                f"{where} prepared its data differently from {str(first.path)!r} (other ids or tokens, e.g. another "
                "tokenizer): its model would read the ensemble's batches as other inputs"
            )


@dataclass
class Ensemble:
    """Loaded runs and the ensemble of their models (built by :func:`load_ensemble`).

    Attributes:
        runs: the members' trained runs (one per member; snapshots share their run's data).
        labels: one label per member (its directory, with ``@epoch-<e>`` for a snapshot).
        model: the :class:`~embreg.models.ensemble.PredictionEnsemble`, in eval mode.
        run: the first run with the ensemble as its model (``predict``, ``recommend``, ``score``).
    """

    runs: list[TrainedRun]
    labels: list[str]
    model: PredictionEnsemble
    run: TrainedRun

    @property
    def task(self) -> str:
        return self.run.task

    def evaluate(self, split: str = "test") -> dict[str, float]:
        """The task's metrics of the ensemble on ``split`` (``train``, ``valid`` or ``test`` of the runs' data).

        Raises:
            ConfigError: a split the task's evaluator does not have.
        """
        return self._score(self.model, split)

    def member_metrics(self, split: str = "test") -> list[dict[str, float]]:
        """Each member's metrics on ``split``, in the order of :attr:`labels`."""
        return [self._score(member, split) for member in self.model.members]

    def _score(self, model: torch.nn.Module, split: str) -> dict[str, float]:
        evaluator = self.run.evaluator
        names = getattr(evaluator, "split_names", None)
        if names is not None and split not in names:
            raise ConfigError(f"split {split!r} is not one of this task's splits: {', '.join(names)}")
        return dict(evaluator(model, split))


def _snapshot_members(run: TrainedRun) -> list[tuple[str, torch.nn.Module]]:
    import copy

    snapshots = EpochSnapshots(run.path)
    epochs = snapshots.epochs()
    if not epochs:
        raise DataError(
            f"{str(run.path)!r} kept no snapshots (train.snapshot_ensemble=true with train.schedule=cosine-restarts "
            "keeps them; train.keep_checkpoints=none deletes them)"
        )
    members = []
    for epoch in epochs:
        model = copy.deepcopy(run.model)
        model.load_state_dict(snapshots.state(epoch))
        members.append((f"{run.path}@epoch-{epoch}", model.eval()))
    return members


def load_ensemble(
    paths: Sequence[str | Path],
    *,
    checkpoint: str = "best",
    device: str | torch.device = "cpu",
    snapshots: bool = False,
) -> Ensemble:
    """The ensemble of the runs in ``paths`` (see the module docstring).

    Args:
        paths: run directories; a multi-seed directory stands for each of its seeds.
        checkpoint: ``best`` or ``last``, the weights each run contributes (unless ``snapshots``).
        device: where the models go.
        snapshots: take each run's kept snapshots (:mod:`embreg.train.snapshots`) instead of its checkpoint.

    Raises:
        ConfigError: no runs, a single member, runs of different tasks or data (:func:`check_same_data`), or a task
            whose predictions have no averaging rule (:data:`embreg.models.ensemble.TASK_COMBINE`).
        DataError: as :func:`embreg.serving.load`; a run without snapshots when ``snapshots`` is set.
    """
    directories = run_directories(paths)
    if not directories:
        raise ConfigError("an ensemble needs at least one run directory")
    runs = [load(path, checkpoint=checkpoint, device=device) for path in directories]
    check_same_data(runs)
    combine = combine_for_task(runs[0].task)
    if snapshots:
        members = [member for run in runs for member in _snapshot_members(run)]
    else:
        members = [(str(run.path), run.model) for run in runs]
    if len(members) < 2 and not snapshots:
        raise ConfigError(
            f"an ensemble needs at least two members; {', '.join(map(str, paths))} gave one run (name more runs, a "
            "multi-seed directory, or --snapshots)"
        )
    model = PredictionEnsemble([m for _, m in members], combine).eval()
    return Ensemble(runs, [label for label, _ in members], model, dataclasses.replace(runs[0], model=model))


def report_table(result: dict[str, Any]) -> str:
    """A markdown table of ``embreg ensemble``'s result: one row per member, their mean, and the ensemble.

    Example:
        >>> print(report_table({"task": "rating", "split": "test", "members": {"a": {"rmse": 1.0}, "b": {"rmse": 0.5}},
        ...                     "ensemble": {"rmse": 0.6}}), end="")
        rating ensemble of 2 members on the test split
        <BLANKLINE>
        | model | rmse |
        |---|---|
        | a | 1.0000 |
        | b | 0.5000 |
        | mean of the members | 0.7500 |
        | ensemble | 0.6000 |
    """
    metrics = list(result["ensemble"])
    members = result["members"]
    rows = [f"| {label} | " + " | ".join(f"{m[k]:.4f}" for k in metrics) + " |" for label, m in members.items()]
    means = [float(np.mean([m[k] for m in members.values()])) for k in metrics]
    rows.append("| mean of the members | " + " | ".join(f"{v:.4f}" for v in means) + " |")
    rows.append("| ensemble | " + " | ".join(f"{result['ensemble'][k]:.4f}" for k in metrics) + " |")
    head = f"| model | {' | '.join(metrics)} |\n|{'---|' * (len(metrics) + 1)}\n"
    title = f"{result['task']} ensemble of {len(members)} members on the {result['split']} split\n\n"
    return title + head + "\n".join(rows) + "\n"

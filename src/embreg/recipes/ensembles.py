"""A run's own ensembles: checkpoint averaging and snapshot ensembles, evaluated like the run's own metrics.

:func:`snapshot_callbacks` gives the trainer the :class:`~embreg.train.snapshots.EpochSnapshots` callback a recipe
needs (``train.average_checkpoints``, ``train.snapshot_ensemble``); once the run has trained,
:func:`ensemble_metrics` evaluates, with the task's own evaluator on the validation and test splits:

* ``averaged_<split>_<metric>``: the model whose weights are the mean of the last ``average_checkpoints`` epochs'
  (written to ``averaged.safetensors``, ``{"model": ..., "epochs": [...]}``); ``averaged_epochs`` counts them;
* ``snapshots_<split>_<metric>``: the ensemble averaging the predictions of the cosine cycles' snapshots
  (:class:`~embreg.models.ensemble.PredictionEnsemble`, by the task's rule); ``snapshots_count`` counts them (a
  run that early stopping ended before the first cycle's end has ``snapshots_count: 0`` and no ensemble metrics).

Both land in ``metrics.json`` beside the best epoch's metrics, so ``embreg compare`` and ``--seeds`` summaries
read them. Ensembles of separate runs (seeds, recipes) are :mod:`embreg.serving.ensemble` (``embreg ensemble``).

Example:
    >>> from embreg.recipes import load_recipe
    >>> from embreg.recipes.run import run_single
    >>> recipe = load_recipe("mf", ["data.max_rows=2000", "train.epochs=2", "train.progress=false",
    ...                             "train.average_checkpoints=2"])
    >>> metrics = run_single(recipe, None).metrics
    >>> metrics["averaged_epochs"], "averaged_test_rmse" in metrics
    (2, True)
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from embreg.models.ensemble import PredictionEnsemble, combine_for_task
from embreg.runs.checkpoint import save_checkpoint
from embreg.train.snapshots import EpochSnapshots, average_states, snapshot_cycle_ends
from embreg.train.trainer import metric_prefix

__all__ = ["AVERAGED_CHECKPOINT", "snapshot_callbacks", "ensemble_metrics"]

AVERAGED_CHECKPOINT = "averaged.safetensors"
"""Where a run with ``train.average_checkpoints`` writes the averaged weights (``embreg.load(run, "averaged")``)."""


def snapshot_callbacks(train: Any, run_dir: str | Path | None) -> list[EpochSnapshots]:
    """The snapshot-keeping callback the ``train`` section asks for (``[]``: none)."""
    keep_last = train.average_checkpoints or 0
    ends = snapshot_cycle_ends(train)
    if not keep_last and not ends:
        return []
    return [EpochSnapshots(run_dir, keep_last=keep_last, epochs=ends)]


def _evaluate(model: torch.nn.Module, trainer: Any, evaluator: Any, prefix: str) -> dict[str, float]:
    metrics: dict[str, float] = {}
    for split in (trainer.val_split, trainer.test_split):
        if split is None:
            continue
        for name, value in evaluator(model, split).items():
            metrics[f"{prefix}_{metric_prefix(split)}_{name}"] = value
    return metrics


def _with_state(model: torch.nn.Module, state: dict[str, Any]) -> torch.nn.Module:
    copied = copy.deepcopy(model)
    copied.load_state_dict(state)
    return copied.eval()


def ensemble_metrics(recipe: Any, trainer: Any, evaluator: Any, run_dir: str | Path | None) -> dict[str, float]:
    """The averaged model's and the snapshot ensemble's metrics (``{}`` when the recipe asks for neither).

    Args:
        recipe: the run's recipe.
        trainer: the trainer that has finished (its callbacks hold the kept snapshots).
        evaluator: the task's evaluator.
        run_dir: the run directory (``averaged.safetensors`` goes there; ``None``: nowhere).
    """
    kept = [cb for cb in trainer.callbacks if isinstance(cb, EpochSnapshots)]
    if not kept:
        return {}
    snapshots, train = kept[0], recipe.train
    metrics: dict[str, float] = {}
    if train.average_checkpoints:
        epochs = snapshots.last(train.average_checkpoints, trainer.next_epoch)
        state = average_states([snapshots.state(e) for e in epochs])
        metrics["averaged_epochs"] = len(epochs)
        metrics.update(_evaluate(_with_state(trainer.model, state), trainer, evaluator, "averaged"))
        if run_dir is not None:
            save_checkpoint(Path(run_dir) / AVERAGED_CHECKPOINT, {"model": state, "epochs": epochs})
    if train.snapshot_ensemble:
        # early stopping may end a run before some cycles (or any) end: the count says how many snapshots there are
        ends = [e for e in snapshot_cycle_ends(train) if e < trainer.next_epoch]
        metrics["snapshots_count"] = len(ends)
        if ends:
            members = [_with_state(trainer.model, snapshots.state(e)) for e in ends]
            ensemble = PredictionEnsemble(members, combine_for_task(recipe.task))
            metrics.update(_evaluate(ensemble, trainer, evaluator, "snapshots"))
    if train.keep_checkpoints == "none":
        snapshots.drop_all()
    return metrics

"""``embreg.load(run_dir)``: a finished run directory back as a ready model with the original ids of its data.

What a run directory holds is enough to rebuild its model: ``config.yaml`` is the resolved recipe, and the task's
data preparation is deterministic (seeded by ``data.split_seed`` and ``train.seed``, as
:func:`embreg.recipes.run.build_run` does it). Loading therefore prepares the recipe's data again, which gives the
id vocabularies (original user / item / token / class ids <-> indices) and the training history of every user,
builds the model as the run built it (the regularisers' one-time ``prepare`` included: Mixout, weight drop), and
loads the weights from the safetensors checkpoint (:func:`embreg.runs.checkpoint.load_checkpoint`: nothing is
unpickled). The task's record of its data (``split.json`` / ``corpus.json``) is compared with the one the run
wrote, so data that changed since training (an edited ``data.path`` file) is an error, not silently other ids.
Classification and regression runs skip the data: their ``serving.json`` records the classes and the tokenizer's
fingerprint, all that predictions on new texts need, so the model is rebuilt from it alone
(:meth:`~embreg.tasks.TaskAdapter.serving_data`); :attr:`TrainedRun.prepared` and ``evaluator`` prepare
the data (and check it) when first asked for.
Runs trained under ``torchrun`` write the same files and load the same way.

Example:
    >>> from embreg.recipes import load_recipe
    >>> from embreg.recipes.run import run_single
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = run_single(load_recipe("mf", ["data.max_rows=500", "train.epochs=1", "train.progress=false"]), d)
    >>> run = load(d)
    >>> run.task, run.model.training, sorted(run.vocabularies)
    ('rating', False, ['item', 'user'])
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import torch

from embreg.errors import ConfigError, DataError
from embreg.runs.checkpoint import _json_default, load_checkpoint
from embreg.runs.run_dir import Checkpoint, RunDirectory
from embreg.serving.run_checks import check_config_as_trained, check_run_status, checkpoint_epoch, select_run
from embreg.serving.trained_run import RunData, TrainedRun
from embreg.serving.vocabularies import task_vocabularies

__all__ = ["load", "CHECKPOINTS"]

CHECKPOINTS = ("best", "last", "averaged")
"""The weights of a run ``load`` can take: its best epoch's, its last, or the average of its last epochs'."""
AVERAGED_CHECKPOINT = "averaged.safetensors"


def load(
    run_dir: str | Path,
    checkpoint: str = "best",
    device: str | torch.device = "cpu",
    *,
    seed: int | None = None,
    allow_unfinished: bool = False,
    allow_failed: bool = False,
) -> TrainedRun:
    """The model of a finished run in eval mode on ``device``, its recipe and the id vocabularies of its data.

    Before anything is built, the run directory is checked (:mod:`embreg.serving.run_checks`): one seed of a
    multi-seed run, a finished run, and a ``config.yaml`` that says what the run trained with.

    Args:
        run_dir: a single-seed run directory, or a multi-seed one with ``seed``.
        checkpoint: ``"best"`` (the best validation epoch, ``best.safetensors``), ``"last"``, or ``"averaged"``
            (the mean weights of the last epochs, ``averaged.safetensors``, of a run with
            ``train.average_checkpoints``).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"auto"`` or a ``torch.device``.
        seed: which ``seed-<s>/`` of a multi-seed run (``embreg run --seeds N``) to load.
        allow_unfinished: load a run that is still training or was stopped before its end (a warning names the
            epoch its checkpoint holds).
        allow_failed: load a run whose training failed (diverged, or final metrics not finite), likewise.

    Returns:
        a :class:`~embreg.serving.trained_run.TrainedRun` (``predict``, ``recommend``, ``score``).

    Raises:
        ConfigError: ``checkpoint`` is not ``best``, ``last`` or ``averaged``, or ``config.yaml`` was edited after
            training in a key that changes the model or its data (each such key named with both values).
        UnservableRunError: the run is unfinished or failed and ``allow_*`` does not allow it (a ``DataError``).
        DataError: ``run_dir`` is not a run directory (no ``config.yaml``); a multi-seed directory without ``seed``
            (the message lists its seed folders), a ``seed`` it lacks, or ``seed`` for a single-seed run; the
            checkpoint is missing (the message names the file and ``train.keep_checkpoints``) or corrupt, its
            weights do not fit the rebuilt model, or the task's data differs from the data the run was trained on.
    """
    from embreg.recipes.recipe import Recipe
    from embreg.recipes.shipped import recipe_from_mapping
    from embreg.train.device import resolve_device

    if checkpoint not in CHECKPOINTS:
        raise ConfigError(f"checkpoint={checkpoint!r} must be one of {', '.join(CHECKPOINTS)}")
    files = RunDirectory(select_run(run_dir, seed))
    config = _config(files)
    check_config_as_trained(files, config)
    averaged = checkpoint == "averaged"
    which = cast(Checkpoint, "best" if averaged else checkpoint)
    path = files.file(AVERAGED_CHECKPOINT if averaged else files.checkpoint_name(which))
    allowed = {"allow_unfinished": allow_unfinished, "allow_failed": allow_failed}
    if not path.is_file():
        check_run_status(files, config, path, None, **allowed)  # an unfinished run may have no checkpoint yet
    if averaged and not path.is_file():
        raise DataError(
            f"checkpoint not found: {str(path)!r}; a run writes it with train.average_checkpoints=K "
            f"(this one: {config.get('train', {}).get('average_checkpoints')!r})"
        )
    if not path.is_file():
        kept = config.get("train", {}).get("keep_checkpoints", "?")
        raise DataError(
            f"checkpoint not found: {str(path)!r}; the run kept {kept!r} checkpoints (train.keep_checkpoints). "
            "Load another checkpoint (checkpoint='best'|'last', --checkpoint), or train again with "
            "--set train.keep_checkpoints=best"
        )
    recipe: Recipe = recipe_from_mapping(config)
    state = load_checkpoint(path, map_location="cpu") if averaged else files.load_checkpoint(which, map_location="cpu")
    if state is None or "model" not in state:
        raise DataError(f"checkpoint {str(path)!r} holds no model weights")
    epoch = checkpoint_epoch(state)
    check_run_status(files, config, path, epoch, **allowed)
    with _own_random_stream():
        served = recipe.adapter.serving_data(recipe, lambda name: _stored_record(files, name))
    if served is None:
        built = _build(recipe)
        _check_records(files, recipe, built.prepared)
        data = RunData(built.prepared, built.evaluator)
    else:  # the model is rebuilt from the run's records; the data set is prepared only if asked for
        built = _build(recipe, served)
        data = RunData(prepare=lambda: _prepare(files, recipe))
    model = built.model
    for regularizer in built.regularizers:  # the one-time model changes the trainer made before training
        if hasattr(regularizer, "prepare"):
            model = regularizer.prepare(model)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as exc:
        raise DataError(
            f"the weights in {str(path)!r} do not fit the model config.yaml builds (was the data or the code "
            f"changed since training?): {str(exc).splitlines()[0]}"
        ) from exc
    target = resolve_device(device)
    model = model.to(target).eval()
    return TrainedRun(
        path=files.path,
        recipe=recipe,
        model=model,
        data=data,
        vocabularies=task_vocabularies(recipe, built.prepared),
        device=target,
        checkpoint=checkpoint,
        epoch=epoch,
    )


def _config(files: RunDirectory) -> dict[str, Any]:
    config = files.read_config()
    if config is None:
        raise DataError(f"{str(files.path)!r} is not a run directory: it holds no config.yaml")
    return config


@contextlib.contextmanager
def _own_random_stream() -> Iterator[None]:
    """Loading a model leaves the caller's random stream alone: torch's global generator is as it was after it."""
    state = torch.random.get_rng_state()
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def _build(recipe: Any, served: Any = None) -> Any:
    """The run's parts as training built them; given the data for serving (``served``), its model only."""
    from embreg.recipes.run import build_run
    from embreg.tasks.data_files import quiet_notices

    with _own_random_stream(), quiet_notices():  # training's notes on the data are in report.md and split.json
        return build_run(recipe, served, model_only=served is not None)


def _prepare(files: RunDirectory, recipe: Any) -> tuple[Any, Any]:
    """The task's data, prepared as training prepared it and checked against the run's records, and its evaluator."""
    from embreg.tasks.data_files import quiet_notices
    from embreg.train.seeding import seed_everything

    with _own_random_stream(), quiet_notices():  # training's notes on the data are in report.md and split.json
        seed_everything(recipe.train.seed)
        prepared = recipe.adapter.prepare(recipe)
    _check_records(files, recipe, prepared)
    return prepared, recipe.adapter.evaluator(recipe, prepared)


def _stored_record(files: RunDirectory, name: str) -> Any:
    """The JSON record ``name`` the run wrote, ``None`` if it wrote none."""
    path = files.file(name)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _check_records(files: RunDirectory, recipe: Any, prepared: Any) -> None:
    """The task's records of the prepared data equal those the run wrote (where the run wrote any)."""
    for name, record in recipe.adapter.records(recipe, prepared).items():
        path = files.file(name)
        if not path.is_file():
            continue
        stored = json.loads(path.read_text())
        fresh = json.loads(json.dumps(record, default=_json_default))
        if stored != fresh:
            changed = sorted(k for k in set(stored) | set(fresh) if stored.get(k) != fresh.get(k))
            raise DataError(
                f"the data config.yaml names is not the data this run was trained on: {name} differs in "
                f"{', '.join(changed)} (was a data file edited or replaced since training?)"
            )

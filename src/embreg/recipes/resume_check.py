"""What a resumed run may change: its resolved config is compared with the one its directory holds.

A resume continues the run in a directory exactly where it stopped, so it must be the same run: the stored
``config.yaml`` and the new resolved recipe may differ only in the keys of :data:`SAFE_TO_CHANGE`, which change
where or how visibly the same steps run, never what they compute, and in ``train.epochs``, which may grow to
extend a run (:func:`epochs_change_problem`). Any other difference (``train.lr``, ``model.l2``,
``data.max_rows``, ``model.dim`` ...) is refused before anything is written, naming each key with both values:
the optimizer state would keep the old learning rate, a regulariser would apply from the resume point on, the
data would be re-split mid-run, a model of another shape would not load. The number of processes
(``world_size`` in ``run.json``) is compared too: each rank trains its shard of every epoch, so a run continued
under another number of processes is no longer an exact continuation.

A finished run is read back as it is, unless its epochs grew: a run that used up its epoch budget then trains the
new epochs from ``last.safetensors`` (refused when ``train.keep_checkpoints`` dropped it). A run that early stopping
ended stays ended: an uninterrupted run with the larger budget would have stopped at the same epoch, so its
results are already those of the new config.

Example:
    >>> stored = {"train": {"lr": 0.001, "epochs": 5, "device": "cpu"}}
    >>> new = {"train": {"lr": 0.01, "epochs": 8, "device": "cuda"}}
    >>> [key for key, _, _ in refused_differences(stored, new)]
    ['train.lr']
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from embreg.config import to_dict
from embreg.errors import ConfigError
from embreg.optim.schedules import fixed_length
from embreg.runs.run_dir import SUMMARY, RunDirectory

__all__ = [
    "SAFE_TO_CHANGE",
    "safe_to_change",
    "flatten_config",
    "config_differences",
    "refused_differences",
    "epochs_change_problem",
    "check_resume",
    "check_seed_count",
    "extends_finished_run",
    "run_record",
    "layout_of",
]

SAFE_TO_CHANGE: dict[str, str] = {
    "train.device": "where the steps run (checkpoints load on any device)",
    "train.precision": "the arithmetic of the forward pass; weights and optimizer state stay float32",
    "train.threads": "how many CPU threads compute the same steps",
    "train.fused_step": "the fused step computes the autograd step and shares its optimizer state",
    "train.index_transforms_on": "where SSE draws its swaps; the law of the swaps is the same",
    "train.progress": "whether a progress bar is shown",
    "train.log_to": "which loggers see the records",
    "train.log_every": "how often the loggers record a training step",
    "train.keep_checkpoints": "which checkpoints stay once the run has finished",
    "search": "the space 'embreg sweep' searches; a run never reads it",
}
"""The config keys a resumed run may change (a key covers the keys below it), each with the reason it is safe.

They choose where and how visibly the same steps run, not what the steps compute. ``train.epochs`` is not here:
it may grow, and only grow (:func:`epochs_change_problem`).
"""

_MISSING = "<absent>"


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys of a nested config: mappings by key, lists by index (``regularizers[0].weight``).

    Example:
        >>> flatten_config({"model": {"dim": 8}, "regularizers": [{"name": "lnsr"}], "log_to": []})
        {'model.dim': 8, 'regularizers[0].name': 'lnsr', 'log_to': []}
    """
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            flat.update(flatten_config(value, name))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                flat.update(flatten_config(item, f"{name}[{i}]"))
        else:
            flat[name] = value
    return flat


def config_differences(stored: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(key, stored value, new value)`` for every dotted key whose value differs (``'<absent>'`` where missing).

    Both sides go through a YAML round trip first, as ``config.yaml`` did, so tuples and lists compare equal. A key
    absent from one side and empty (``null``, ``[]``, ``{}``) on the other is no difference: a config written
    before the key existed meant what its empty default means (e.g. ``data.fit_to_file: []``).

    Example:
        >>> config_differences({"data": {"path": None}}, {"data": {"path": None, "fit_to_file": []}})
        []
    """
    old = flatten_config(_as_stored(stored))
    now = flatten_config(_as_stored(new))
    differences = []
    for key in sorted(old.keys() | now.keys()):
        before, after = old.get(key, _MISSING), now.get(key, _MISSING)
        if before == after:
            continue
        if before is _MISSING and _empty(after) or after is _MISSING and _empty(before):
            continue
        differences.append((key, before, after))
    return differences


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (list, dict)) and not value)


def safe_to_change(key: str) -> bool:
    """Whether the dotted ``key`` is one of :data:`SAFE_TO_CHANGE` or lies below one.

    Example:
        >>> safe_to_change("train.log_to"), safe_to_change("search.space.lr"), safe_to_change("train.lr")
        (True, True, False)
    """
    return any(key == safe or key.startswith((f"{safe}.", f"{safe}[")) for safe in SAFE_TO_CHANGE)


def refused_differences(stored: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """The differences a resume may not make: every key outside :data:`SAFE_TO_CHANGE`, and ``train.epochs``
    when :func:`epochs_change_problem` objects."""
    refused = []
    for key, old, now in config_differences(stored, new):
        if safe_to_change(key):
            continue
        if key == "train.epochs" and epochs_change_problem(stored, new) is None:
            continue
        refused.append((key, old, now))
    return refused


def epochs_change_problem(stored: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why ``train.epochs`` may not change from ``stored`` to ``new`` (``None``: it may).

    More epochs extend a run. Fewer are refused (the run may have trained past them already), and so is any
    change under a schedule whose learning rate follows the whole run's steps (``linear``, ``cosine``, ``one-cycle``:
    :func:`embreg.optim.schedules.fixed_length`).
    """
    old_epochs, new_epochs = stored.get("train", {}).get("epochs"), new.get("train", {}).get("epochs")
    if old_epochs == new_epochs:
        return None
    if not isinstance(old_epochs, int) or not isinstance(new_epochs, int) or new_epochs < old_epochs:
        return "train.epochs may only grow on resume (to extend a run)"
    schedule = new.get("train", {}).get("schedule")
    if fixed_length(str(schedule)):
        return (
            f"under train.schedule={schedule} the learning rate follows the whole run's steps, so its length is fixed"
        )
    return None


def _as_stored(config: Mapping[str, Any]) -> dict[str, Any]:
    return yaml.safe_load(yaml.safe_dump(dict(config), sort_keys=False)) or {}


def _show(value: Any) -> str:
    return value if value == _MISSING else json.dumps(value, default=str)


def run_record(layout: str, world_size: int, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What ``run.json`` holds when a run starts: the layout (``single`` or ``seeds``), the number of processes and,
    for a single-seed run, the resolved ``config`` it trains with and ``status`` ``training``.

    Serving compares ``config.yaml`` with that config (:mod:`embreg.serving.run_checks`), so an edit made after
    training is found. Only a run rewrites both: a resume whose safe keys changed writes the new config to each.

    Example:
        >>> run_record("single", 1, {"name": "mf"})
        {'layout': 'single', 'world_size': 1, 'status': 'training', 'config': {'name': 'mf'}}
    """
    record: dict[str, Any] = {"layout": layout, "world_size": world_size}
    if config is not None:
        record.update(status="training", config=_as_stored(config))
    return record


def layout_of(files: RunDirectory) -> str | None:
    """``single`` or ``seeds`` from ``run.json``, else from the files (``None``: no run here yet)."""
    record = files.read_run_record()
    if record is not None and "layout" in record:
        return str(record["layout"])
    entries = files.run_entries()
    if SUMMARY in entries or any(name.startswith("seed-") for name in entries):
        return "seeds"
    return "single" if entries else None


def check_resume(files: RunDirectory, recipe: Any, *, layout: str, world_size: int) -> None:
    """Refuses to resume the run in ``files`` with ``recipe`` unless it is the same run (see the module docstring).

    Nothing is written. A directory without a run starts one, and so does one whose run stopped before writing
    its ``config.yaml``.

    Args:
        files: the run directory.
        recipe: the resolved recipe of the resumed run (a dataclass, or its mapping).
        layout: ``single`` (one seed) or ``seeds`` (``--seeds N``).
        world_size: the number of processes training now.

    Raises:
        ConfigError: the directory holds a run of the other layout, or one trained by another number of
            processes, or a config that differs in keys that may not change (each named with both values), or a
            finished run whose epochs grew and whose ``last.safetensors`` is gone.
    """
    there = layout_of(files)
    if there is not None and there != layout:
        kinds = {"single": "a single-seed run", "seeds": "a multi-seed run (--seeds N)"}
        raise ConfigError(
            f"cannot resume {files.path} as {kinds.get(layout, layout)}: it holds {kinds.get(there, there)}. "
            f"Resume it as it was started, or start a new run with --overwrite or another --out"
        )
    stored = files.read_config()
    if stored is None:
        return
    new = to_dict(recipe) if not isinstance(recipe, Mapping) else dict(recipe)
    refused = refused_differences(stored, new)
    record = files.read_run_record() or {}
    stored_world = int(record.get("world_size", 1))
    problems = [f"{key}: {_show(old)} in the run, {_show(now)} now" for key, old, now in refused]
    if stored_world != world_size:
        problems.append(
            f"world size: {stored_world} process(es) trained the run, {world_size} now (each rank trains a shard of "
            "every epoch, so another number of processes would not continue the same run)"
        )
    if problems:
        epochs = epochs_change_problem(stored, new) if any(key == "train.epochs" for key, _, _ in refused) else None
        hint = f" ({epochs})" if epochs else ""
        allowed = ", ".join(["train.epochs (more)", *SAFE_TO_CHANGE])
        raise ConfigError(
            f"cannot resume {files.path}: the run there differs from this one in {'; '.join(problems)}{hint}. A resume "
            f"continues the same run; only {allowed} may change. Resume with the run's own settings, or start a new "
            "run with --overwrite or another --out"
        )
    if layout == "single" and extends_finished_run(files, new) and not files.has_checkpoint("last"):
        keep = new.get("train", {}).get("keep_checkpoints")
        raise ConfigError(
            f"cannot extend the finished run in {files.path} to train.epochs={new['train']['epochs']}: it kept no "
            f"last.safetensors (train.keep_checkpoints={stored.get('train', {}).get('keep_checkpoints')!r} dropped "
            "it when it finished), and more epochs can only continue from there. Train afresh with --overwrite or "
            f"another --out{' and train.keep_checkpoints=all' if keep != 'all' else ''}"
        )


def check_seed_count(files: RunDirectory, first_seed: int, seeds: int) -> None:
    """Refuses to resume the multi-seed run in ``files`` with fewer seeds than it has already started.

    ``--seeds N --resume`` may grow a series (``--seeds 10`` extends a 5-seed run); with fewer seeds its summary
    would cover only some of the trained seeds and leave the others beside it unsummarised.

    Raises:
        ConfigError: ``files`` holds ``seed-<s>/`` directories beyond ``first_seed + seeds - 1``, naming how many
            seeds the run has and the ``--seeds`` that resumes it.
    """
    started = sorted(int(name[len("seed-") : -1]) for name in files.run_entries() if name.startswith("seed-"))
    beyond = [seed for seed in started if seed >= first_seed + seeds]
    if beyond:
        count = max(started) - first_seed + 1
        raise ConfigError(
            f"cannot resume {files.path} with --seeds {seeds}: it holds {len(started)} seed run(s) (seed-"
            f"{started[0]} .. seed-{started[-1]}), and its summary must cover every one of them. Resume with "
            f"--seeds {count} (or more, to add seeds)"
        )


def extends_finished_run(files: RunDirectory, new: Mapping[str, Any]) -> bool:
    """The finished run in ``files`` used up its epoch budget, and ``new`` (a config mapping) gives it more epochs.

    A run that early stopping ended (``epochs_run`` below its ``train.epochs``) is not extended: a run with the
    larger budget would have stopped at the same epoch.
    """
    metrics, stored = files.read_metrics(), files.read_config()
    if metrics is None or stored is None or "epochs_run" not in metrics:
        return False
    old_epochs = stored.get("train", {}).get("epochs")
    new_epochs = new.get("train", {}).get("epochs")
    if not isinstance(old_epochs, int) or not isinstance(new_epochs, int):
        return False
    return int(metrics["epochs_run"]) >= old_epochs and new_epochs > old_epochs

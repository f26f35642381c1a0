"""Hyper-parameter search over a recipe's ``search`` space on the validation split, with Optuna's TPE sampler.

Works for a recipe of any family: each trial is one :func:`embreg.recipes.run.run_single` scored on the validation
metric the recipe's task monitors.

Every variant of a comparison gets the same number of trials and the same sampler seed, so tuning budgets are
equal. Test metrics are never looked at while searching. A trial that fails (it diverges, its sampled values are
refused, its arithmetic overflows, ...) is a failed trial, not the end of the search: ``trials.csv`` records its
error and the summary counts the failed trials.
"""

from __future__ import annotations

import copy
import csv
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from embreg.config import apply_overrides, to_dict
from embreg.errors import ConfigError, EmbregError, TrainingError
from embreg.progress import LineProgress, is_terminal
from embreg.recipes.recipe import SearchParam
from embreg.recipes.shipped import recipe_from_mapping, recipe_mapping
from embreg.runs.checkpoint import atomic_write_text


def _suggest(trial: Any, key: str, param: SearchParam) -> Any:
    if param.type == "categorical":
        return trial.suggest_categorical(key, param.choices)
    low, high = param.bounds()
    if param.type == "int":
        return trial.suggest_int(key, int(low), int(high))
    return trial.suggest_float(key, low, high, log=param.type == "log_float")


def sweep(
    recipe: str | Path,
    *,
    trials: int,
    overrides: Sequence[str] = (),
    out_dir: str | Path,
    seed: int = 0,
    start_points: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Tunes ``recipe`` for ``trials`` trials; writes ``trials.csv``, ``best.yaml`` (the tuned recipe) to ``out_dir``.

    Args:
        recipe: shipped recipe name or YAML path; its ``search`` section is the space.
        trials: number of trials (each one training run scored on the validation split).
        overrides: ``key=value`` settings applied to every trial.
        out_dir: where ``trials.csv`` and ``best.yaml`` go.
        seed: seed of the TPE sampler.
        start_points: parameter sets evaluated first (they count towards ``trials``), e.g. the tuned values of a
            baseline with the regulariser switched off, so that a variant's search starts where the baseline ended.
            Keys missing from a start point are sampled.

    Returns ``{"monitor", "value", "params", "trials", "failed"}``: the best trial's metric, value and parameters,
    every trial's row, and how many trials failed.

    A trial that raises anything (a diverging run's :class:`~embreg.errors.TrainingError`, a sampled value the
    recipe refuses, an overflow inside the optimizer) is recorded as failed, in Optuna's ``FAIL`` state with its
    error as the ``error`` user attribute and in ``trials.csv`` (``state=failed`` and its ``error``), and the search
    goes on; ``best.yaml`` comes from the completed trials. Bad input that concerns every trial (an unknown recipe,
    a bad ``--set``, no ``search`` section) is refused before the first trial.

    Raises:
        TrainingError: every trial failed, so there is no best one (the message quotes the first error).
        OutputPathError: ``out_dir`` is a file or lies below one (before the first trial).
    """
    try:
        import optuna
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ConfigError("embreg sweep needs Optuna: pip install 'embreg[hpo]'") from error
    from embreg.recipes.run import run_single
    from embreg.runs.output_paths import check_output_directory

    if trials < 1:
        raise ConfigError(f"trials={trials} must be >= 1")
    base = recipe_mapping(recipe, overrides)
    cfg0 = recipe_from_mapping(base)
    if not cfg0.search:
        raise ConfigError(f"recipe {cfg0.name!r} has no 'search' section to sweep")
    monitor, mode = cfg0.monitor
    out = Path(out_dir)
    check_output_directory(out, "sweep directory")
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    terminal = is_terminal(sys.stderr)  # Optuna draws its bar there; elsewhere a plain line per trial
    lines = LineProgress(trials, "sweep", "trials", disable=terminal)

    def objective(trial: Any) -> float:
        params = {key: _suggest(trial, key, p) for key, p in cfg0.search.items()}
        settings = [f"{k}={v}" for k, v in params.items()] + ["train.progress=false"]
        try:
            metrics = run_single(recipe_from_mapping(apply_overrides(base, settings)), None).metrics
        except Exception as error:  # noqa: BLE001 - any failure of one trial fails that trial, not the search
            message = _one_line(error)
            trial.set_user_attr("error", message)
            rows.append({"trial": trial.number, **params, monitor: "", "state": "failed", "error": message})
            atomic_write_text(out / "trials.csv", _csv(rows))
            lines.set_postfix({"trial": trial.number, "state": "failed"})
            lines.update(1)
            return math.nan  # Optuna's FAIL state; TPE samples away from it
        value = float(metrics[monitor])
        row = {"trial": trial.number, **params, monitor: value, "best_epoch": metrics["best_epoch"]}
        rows.append({**row, "state": "complete"})
        atomic_write_text(out / "trials.csv", _csv(rows))
        lines.set_postfix({"trial": trial.number, monitor: f"{value:.4f}"})
        lines.update(1)
        return value

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="minimize" if mode == "min" else "maximize", sampler=optuna.samplers.TPESampler(seed=seed)
    )
    for point in start_points:
        unknown = set(point) - set(cfg0.search)
        if unknown:
            raise ConfigError(f"start point keys {sorted(unknown)} are not in the search space {sorted(cfg0.search)}")
        study.enqueue_trial(dict(point))
    study.optimize(objective, n_trials=trials, show_progress_bar=terminal)
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
    if len(failed) == len(study.trials):
        raise TrainingError(
            f"all {len(failed)} trials of the sweep failed (their errors are in {out / 'trials.csv'}); the first: "
            f"{failed[0].user_attrs.get('error', 'no error recorded')}"
        )
    best_params = dict(study.best_trial.params)
    tuned = recipe_from_mapping(apply_overrides(base, [f"{k}={v}" for k, v in best_params.items()]))
    tuned_dict = to_dict(tuned)
    tuned_dict["tuned"] = f"embreg sweep {recipe} --trials {trials} --seed {seed}: {monitor}={study.best_value:.4f}"
    atomic_write_text(out / "best.yaml", yaml.safe_dump(tuned_dict, sort_keys=False))
    return {
        "monitor": monitor,
        "value": study.best_value,
        "params": best_params,
        "trials": copy.deepcopy(rows),
        "failed": len(failed),
    }


def _one_line(error: Exception) -> str:
    """``error`` as one line: its message, prefixed by its type where it is not one of embreg's own errors.

    Example:
        >>> _one_line(RuntimeError("value cannot be converted to type float without overflow"))
        'RuntimeError: value cannot be converted to type float without overflow'
    """
    text = " ".join(str(error).split()) or "no message"
    return text if isinstance(error, (EmbregError, TrainingError)) else f"{type(error).__name__}: {text}"


def _csv(rows: list[dict[str, Any]]) -> str:
    import io

    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=keys)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()

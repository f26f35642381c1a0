"""Runs a study: every variant at every point of its grid, tuned on the validation split, then its final seeds.

For each variant and each point of ``spec.points()`` that the variant runs (``spec.cells()``; ``exclude`` rules
drop the others):

1. **tuning** (when the study has ``tune``): ``grid`` runs every combination of ``tune.space_for(variant)``;
   ``optuna`` runs ``tune.trials`` TPE trials (sampler seed 0, the same for every variant) over ``space`` read as
   ``[low, high]`` ranges (log scale when both are > 0 and ``high / low >= 100``; integers give an integer range,
   any other list is a set of choices) or over the recipe's own ``search`` section when ``space`` is empty. Every
   setting is trained with ``tune.seeds`` seeds (``seed_start``, ``seed_start + 1``, ...) and logged with
   ``phase="tune"``. The chosen setting has the best mean validation value of ``tune.metric`` (default: the
   recipe's monitor and its direction); ties go to the setting tried first.
2. **final**: ``spec.seeds`` seeds of the chosen setting (``setting={}`` without tuning), ``phase="final"``.
   With ``spec.keep_runs`` each is trained into its own run directory and read back when it has finished there
   (:mod:`embreg.studies.kept`); tuning runs keep nothing on disk.

A run's overrides are, in order: ``spec.common``, the variant's ``set``, the point's, the setting's,
``train.seed=<seed>``, then the caller's ``extra_overrides``; the log records them all, so any run can be repeated
alone with ``embreg run RECIPE --set ...``. Runs whose key is already in the log are skipped and the tuning choice
is recomputed from the log, so an interrupted study resumes exactly where it stopped (a key ignores
``extra_overrides``: change them only with a fresh log).

With ``workers > 1`` runs go to a process pool (``spawn``); the parent alone appends to the log, as results
arrive. A failing run stops the study once the runs in flight have finished (they are logged; nothing is
half-written) and raises :class:`StudyRunError` naming the run and its overrides. One runner per log at a time:
a lock file beside the log (``<log>.lock``) refuses a second one (:class:`LogLockedError`).

Example:
    >>> import tempfile, pathlib
    >>> from embreg.studies.spec import StudySpec
    >>> spec = StudySpec.from_mapping({"name": "demo", "title": "t", "paper": "p.txt", "seeds": 1,
    ...     "variants": {"MF": {"recipe": "mf"}}, "metrics": ["test_rmse"],
    ...     "common": ["data.max_rows=2000", "train.epochs=1", "train.progress=false", "train.threads=1"]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     records = run_study(spec, pathlib.Path(d) / "demo.jsonl", progress=False)
    >>> [(r.variant, r.phase, r.seed, r.overrides[-1]) for r in records]
    [('MF', 'final', 0, 'train.seed=0')]
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import sys
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from embreg._locking import hold_lock
from embreg.errors import ConfigError, DataError, TrainingError
from embreg.studies.checks import check_method_metrics, check_study_metrics
from embreg.studies.kept import check_kept_run, kept_run_dir, metrics_stamp
from embreg.studies.runlog import RunLog, RunRecord, machine_record, run_key
from embreg.studies.spec import StudySpec, grid_points, point_overrides

__all__ = [
    "run_study",
    "StudyRunError",
    "LogLockedError",
    "lock_log",
    "default_log_path",
    "Job",
    "run_overrides",
    "metric_direction",
    "tune_metric",
    "tune_seeds",
    "TuningRow",
    "tuning_rows",
    "choose",
    "final_records",
    "planned_runs",
    "same_point",
    "execute",
]

LOWER_IS_BETTER = ("rmse", "mae", "mse", "loss", "logloss", "ppl", "seconds")


class StudyRunError(TrainingError):
    """A run of a study failed; the message names the run, its overrides and how to repeat it alone."""


class LogLockedError(DataError):
    """Another runner holds the study log."""


def metric_direction(metric: str) -> str:
    """``min`` for error-like metrics (rmse, mae, mse, loss, logloss, ppl, seconds), else ``max``.

    Example:
        >>> metric_direction("val_rmse"), metric_direction("val_ndcg@10")
        ('min', 'max')
    """
    return "min" if metric.endswith(LOWER_IS_BETTER) else "max"


def _canon(mapping: dict[str, Any]) -> str:
    return json.dumps(mapping, sort_keys=True, default=str)


def same_point(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two points (or settings) are the same, read from YAML or from the log alike.

    Example:
        >>> same_point({"a": 1, "b": "x"}, {"b": "x", "a": 1})
        True
    """
    return _canon(a) == _canon(b)


def default_log_path(study_file: str | Path, name: str | None = None) -> Path:
    """``<study file's folder>/logs/<name>.jsonl`` (``studies/logs/sse-bpr.jsonl`` for ``studies/sse-bpr.yaml``).

    Example:
        >>> default_log_path("studies/sse-bpr.yaml").as_posix()
        'studies/logs/sse-bpr.jsonl'
    """
    study_file = Path(study_file)
    return study_file.parent / "logs" / f"{name or study_file.stem}.jsonl"


@dataclass(frozen=True)
class Job:
    """One run to do: where it sits in the study and everything it is trained with."""

    variant: str
    point: dict[str, Any]
    phase: Literal["tune", "final"]
    setting: dict[str, Any]
    seed: int
    recipe: str
    overrides: tuple[str, ...]
    run_dir: str | None = None  # the kept run's directory (``keep_runs``), else nothing is kept
    method: str | None = None  # a non-neural baseline run on the recipe's data (VariantSpec.method)

    @property
    def key(self) -> str:
        return run_key(self.variant, self.point, self.phase, self.setting, self.seed)

    def command(self) -> str:
        """The ``embreg run`` (``embreg baseline``) command that repeats this run alone (a kept run: into its
        directory, resuming)."""
        if self.method is not None:
            from embreg.recipes.baselines import split_options

            recipe, options = split_options(self.overrides)
            kept = [o for o in recipe if o.startswith("data.")] + [f"baseline.{o}" for o in options]
            return f"embreg baseline {self.method} {shlex.quote(self.recipe)} " + " ".join(
                f"--set {shlex.quote(o)}" for o in kept
            )
        command = f"embreg run {shlex.quote(self.recipe)} " + " ".join(
            f"--set {shlex.quote(o)}" for o in self.overrides
        )
        return command + (f" --out {shlex.quote(self.run_dir)} --resume" if self.run_dir is not None else "")


def run_overrides(
    spec: StudySpec, variant: str, point: dict[str, Any], setting: dict[str, Any], seed: int, extra: Sequence[str] = ()
) -> list[str]:
    """A run's overrides: common, the variant's, the point's, the setting's, ``train.seed``, then ``extra``.

    Example:
        >>> from embreg.studies.spec import StudySpec
        >>> spec = StudySpec.from_mapping({"name": "d", "title": "t", "paper": "p", "metrics": ["test_rmse"],
        ...     "variants": {"MF": {"recipe": "mf", "set": ["model.dim=8"]}}, "common": ["train.epochs=1"]})
        >>> run_overrides(spec, "MF", {"train.lr": 0.01}, {"model.l2": 0.1}, 3, ["train.threads=1"])
        ['train.epochs=1', 'model.dim=8', 'train.lr=0.01', 'model.l2=0.1', 'train.seed=3', 'train.threads=1']
    """
    return [
        *spec.common,
        *spec.variants[variant].set,
        *point_overrides(point),
        *point_overrides(setting),
        f"train.seed={seed}",
        *extra,
    ]


def tune_seeds(spec: StudySpec) -> list[int]:
    """The tuning seeds: ``seed_start``, ``seed_start + 1``, ... (``tune.seeds`` of them)."""
    return list(range(spec.seed_start, spec.seed_start + (spec.tune.seeds if spec.tune else 0)))


def tune_metric(spec: StudySpec, variant: str, point: dict[str, Any]) -> tuple[str, str]:
    """The validation metric a variant is tuned on at ``point``, and its direction (``min``/``max``).

    ``tune.metric`` when the study names one (direction from its name), else the recipe's monitor.
    """
    if spec.tune is not None and spec.tune.metric is not None:
        return spec.tune.metric, metric_direction(spec.tune.metric)
    from embreg.recipes import load_recipe

    recipe = load_recipe(
        spec.variants[variant].recipe, [*spec.common, *spec.variants[variant].set, *point_overrides(point)]
    )
    return recipe.monitor


@dataclass
class TuningRow:
    """One setting tried while tuning a variant at a point: its validation values by seed."""

    setting: dict[str, Any]
    values: dict[int, float] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        if not self.values:
            return float("nan")
        return math.fsum(self.values.values()) / len(self.values)


def _metric(record: RunRecord, metric: str) -> float:
    if metric not in record.metrics:
        raise DataError(
            f"run {record.variant} seed {record.seed} ({record.phase}, setting {record.setting}) has no "
            f"metric {metric!r}; it has {sorted(record.metrics)}"
        )
    value = record.metrics[metric]
    return float(value) if value is not None else float("nan")


def tuning_rows(
    spec: StudySpec, records: Sequence[RunRecord], variant: str, point: dict[str, Any], metric: str
) -> list[TuningRow]:
    """The settings tried for ``variant`` at ``point``, in the order tried, with their values of ``metric``.

    Grid: the settings of the current space that have runs, in grid order. Optuna: the settings in the order they
    first appear in the log (the trial order), at most ``tune.trials`` of them. Only tuning seeds count.
    """
    if spec.tune is None:
        return []
    seeds = set(tune_seeds(spec))
    rows: dict[str, TuningRow] = {}
    for record in records:
        if record.phase != "tune" or record.variant != variant or record.seed not in seeds:
            continue
        if not same_point(record.point, point):
            continue
        row = rows.setdefault(_canon(record.setting), TuningRow(dict(record.setting)))
        row.values[record.seed] = _metric(record, metric)
    if spec.tune.method == "grid":
        order = [_canon(setting) for setting in grid_points(spec.tune.space_for(variant))]
        return [rows[key] for key in order if key in rows]
    return list(rows.values())[: spec.tune.trials]


def choose(rows: Sequence[TuningRow], mode: str) -> int:
    """Index of the best mean (``mode`` ``min`` or ``max``); ties and NaN means go to the setting tried first.

    Example:
        >>> rows = [TuningRow({"a": 1}, {0: 0.9}), TuningRow({"a": 2}, {0: 0.8}), TuningRow({"a": 3}, {0: 0.8})]
        >>> choose(rows, "min"), choose(rows, "max")
        (1, 0)
    """
    best, best_value = 0, float("nan")
    for index, row in enumerate(rows):
        value = row.mean
        if math.isnan(value):
            continue
        if math.isnan(best_value) or (value < best_value if mode == "min" else value > best_value):
            best, best_value = index, value
    return best


def final_records(
    spec: StudySpec,
    records: Sequence[RunRecord],
    variant: str,
    point: dict[str, Any],
    setting: dict[str, Any] | None = None,
) -> list[RunRecord]:
    """The final runs of ``variant`` at ``point`` of the study's final seeds (one per seed, the latest logged).

    ``setting``: keep only runs of this setting (the chosen one); ``None``: the setting most final runs have.
    """
    seeds = set(spec.final_seeds)
    chosen = [
        r
        for r in records
        if r.phase == "final" and r.variant == variant and r.seed in seeds and same_point(r.point, point)
    ]
    if setting is not None:
        chosen = [r for r in chosen if same_point(r.setting, setting)]
    elif chosen:
        counts: dict[str, int] = {}
        for r in chosen:
            counts[_canon(r.setting)] = counts.get(_canon(r.setting), 0) + 1
        top = max(counts, key=lambda key: counts[key])
        chosen = [r for r in chosen if _canon(r.setting) == top]
    by_seed = {r.seed: r for r in chosen}
    return [by_seed[seed] for seed in sorted(by_seed)]


def planned_runs(spec: StudySpec) -> int:
    """How many runs the study makes in all (tuning and final).

    Example:
        >>> from embreg.studies.spec import StudySpec
        >>> spec = StudySpec.from_mapping({"name": "d", "title": "t", "paper": "p", "metrics": ["test_rmse"],
        ...     "variants": {"A": {"recipe": "mf"}, "B": {"recipe": "mf"}}, "seeds": 3,
        ...     "tune": {"method": "grid", "space": {"model.l2": [0.0, 0.1]}, "seeds": 2}})
        >>> planned_runs(spec)  # 2 variants x (2 settings x 2 seeds + 3 seeds)
        14
    """
    total = 0
    for variant, _ in spec.cells():
        per_point = len(spec.seeds_of(variant))
        if spec.tune is not None and spec.variants[variant].method is None:
            settings = (
                len(grid_points(spec.tune.space_for(variant))) if spec.tune.method == "grid" else spec.tune.trials
            )
            if settings > 1 or spec.tune.method != "grid":  # a one-setting grid has nothing to choose
                per_point += settings * spec.tune.seeds
        total += per_point
    return total


# --------------------------------------------------------------------------------------------------- the lock


@contextlib.contextmanager
def lock_log(log_path: str | Path) -> Iterator[Path]:
    """Holds ``<log>.lock`` (``fcntl.flock``) for one runner; a second one gets :class:`LogLockedError`.

    The lock dies with its process, so a crashed runner never leaves a stale lock behind.

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     log = pathlib.Path(d) / "demo.jsonl"
        ...     with lock_log(log):
        ...         try:
        ...             with lock_log(log):
        ...                 pass
        ...         except LogLockedError as error:
        ...             print("refused:", "demo.jsonl" in str(error))
        refused: True
    """
    log_path = Path(log_path)
    path = log_path.with_name(log_path.name + ".lock")

    def refused(holder: str) -> LogLockedError:
        pid = f" (pid {holder})" if holder else ""
        return LogLockedError(
            f"study log {log_path} is in use by another runner{pid}: wait for it to finish (lock file {path})"
        )

    with hold_lock(path, refused=refused):
        yield path


# --------------------------------------------------------------------------------------------------- one run


def _plain(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()
        except (TypeError, ValueError):
            return str(value)
    return value


def execute(
    recipe: str, overrides: Sequence[str], out_dir: str | None = None, method: str | None = None
) -> tuple[dict[str, Any], float, dict[str, Any]]:
    """Trains one run (``run_single(load_recipe(recipe, overrides), out_dir, resume=out_dir is not None)``): its
    metrics, seconds and machine.

    ``out_dir`` (a kept run, :mod:`embreg.studies.kept`): a finished run there is read back, and its seconds are
    the wall time it took when it was trained. The run's own progress bars stay off (the study shows one bar over
    its runs); that changes nothing it computes. ``method``: the non-neural baseline learnt and scored on the
    recipe's data instead (:func:`embreg.recipes.baselines.run_baseline`; ``baseline.*`` overrides are its options).
    """
    from embreg.recipes import load_recipe
    from embreg.recipes import run as run_module

    started = time.perf_counter()
    if method is not None:
        from embreg.recipes.baselines import run_baseline, split_options

        recipe_overrides, options = split_options(overrides)
        loaded = load_recipe(recipe, [*recipe_overrides, "train.progress=false"])
        done = run_baseline(method, loaded, options)
        return {**done.metrics, "history": {}}, time.perf_counter() - started, machine_record()
    loaded = load_recipe(recipe, [*overrides, "train.progress=false"])
    if out_dir is None:
        result = run_module.run_single(loaded, None)
        seconds = time.perf_counter() - started
    else:
        stamp = metrics_stamp(out_dir)
        result = run_module.run_single(loaded, out_dir, resume=True)
        seconds = time.perf_counter() - started
        if stamp is not None and metrics_stamp(out_dir) == stamp:  # read back, not trained
            seconds = float(result.metrics.get("wall_seconds", seconds))
    metrics = {key: _plain(value) for key, value in result.metrics.items()}
    monitor = loaded.monitor[0]
    # per epoch: learning curves (the training split's counterpart too, when the run scores it) and time-to-target
    kept = ("seconds", "train_loss", monitor, "train_" + monitor.removeprefix("val_"))
    metrics["history"] = {key: [_plain(r[key]) for r in result.history if key in r] for key in kept}
    return metrics, seconds, machine_record()


def _worker_init(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)  # a recipe's own train.threads still wins


class _Inline:
    """Runs submitted jobs in this process, one at a time, in the order submitted."""

    def __init__(self) -> None:
        self.queue: deque[tuple[Future, Callable[..., Any], tuple[Any, ...]]] = deque()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        self.queue.append((future, fn, args))
        return future

    def next_done(self, in_flight: dict[Future, Any]) -> list[Future]:
        while self.queue:
            future, fn, args = self.queue.popleft()
            if future.cancelled():
                continue
            try:
                future.set_result(fn(*args))
            except Exception as exc:  # reported by the scheduler
                future.set_exception(exc)
            return [future]
        return [f for f in in_flight if f.done()]

    def shutdown(self, *, cancel: bool) -> None:
        for future, _, _ in self.queue:
            future.cancel()
        self.queue.clear()


class _Pool:
    def __init__(self, workers: int) -> None:
        import multiprocessing

        threads = max(1, (os.cpu_count() or 1) // workers)
        self.pool = ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init, initargs=(threads,)
        )

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        return self.pool.submit(fn, *args)

    def next_done(self, in_flight: dict[Future, Any]) -> list[Future]:
        done, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
        return [f for f in in_flight if f in done]  # in the order submitted

    def shutdown(self, *, cancel: bool) -> None:
        self.pool.shutdown(wait=not cancel, cancel_futures=True)


# --------------------------------------------------------------------------------------------------- planning


def _optuna_space(spec: StudySpec, variant: str, point: dict[str, Any]) -> dict[str, Any]:
    import optuna

    space = spec.tune.space_for(variant) if spec.tune else {}
    if not space:
        from embreg.recipes import load_recipe

        recipe = load_recipe(
            spec.variants[variant].recipe, [*spec.common, *spec.variants[variant].set, *point_overrides(point)]
        )
        if not recipe.search:
            raise ConfigError(
                f"study {spec.name}: variant {variant!r} is tuned with optuna over its recipe's 'search' "
                f"section, but recipe {recipe.name!r} has none; give tune.space"
            )
        out: dict[str, Any] = {}
        for key, param in recipe.search.items():
            low, high = param.bounds() if param.type != "categorical" else (0.0, 0.0)
            if param.type == "categorical":
                out[key] = optuna.distributions.CategoricalDistribution(list(param.choices or []))
            elif param.type == "int":
                out[key] = optuna.distributions.IntDistribution(int(low), int(high))
            else:
                out[key] = optuna.distributions.FloatDistribution(
                    float(low),
                    float(high),
                    log=param.type == "log_float",
                )
        return out
    out = {}
    for key, values in space.items():
        numeric = (
            isinstance(values, (list, tuple))
            and len(values) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        )
        if not numeric:
            if not isinstance(values, (list, tuple)) or not values:
                raise ConfigError(f"tune.space.{key}: optuna needs [low, high] or a list of choices, got {values!r}")
            out[key] = optuna.distributions.CategoricalDistribution(list(values))
            continue
        low, high = values
        if not low < high:
            raise ConfigError(f"tune.space.{key}: optuna needs [low, high] with low < high, got {values!r}")
        log = low > 0 and high > 0 and high / low >= 100
        if isinstance(low, int) and isinstance(high, int):
            out[key] = optuna.distributions.IntDistribution(low, high, log=log)
        else:
            out[key] = optuna.distributions.FloatDistribution(float(low), float(high), log=log)
    return out


class _Cell:
    """The runs of one variant at one point, as a generator of batches: each batch must be done before the next."""

    def __init__(
        self, spec: StudySpec, variant: str, point: dict[str, Any], extra: Sequence[str], done: dict[str, RunRecord]
    ) -> None:
        self.spec, self.variant, self.point, self.extra, self.done = spec, variant, point, list(extra), done
        self.pending: set[str] = set()
        self.steps = self._steps()

    def job(self, phase: Literal["tune", "final"], setting: dict[str, Any], seed: int) -> Job:
        spec = self.spec
        overrides = run_overrides(spec, self.variant, self.point, setting, seed, self.extra)
        method = spec.variants[self.variant].method
        run_dir = None
        if phase == "final" and spec.keep_runs is not None and method is None:
            run_dir = kept_run_dir(spec.keep_runs, self.variant, self.point, seed).as_posix()
        return Job(
            self.variant,
            dict(self.point),
            phase,
            dict(setting),
            seed,
            spec.variants[self.variant].recipe,
            tuple(overrides),
            run_dir,
            method,
        )

    def _rows(self, settings: list[dict[str, Any]], metric: str) -> list[TuningRow]:
        rows = []
        for setting in settings:
            row = TuningRow(setting)
            for seed in tune_seeds(self.spec):
                row.values[seed] = _metric(self.done[self.job("tune", setting, seed).key], metric)
            rows.append(row)
        return rows

    def _steps(self) -> Generator[list[Job], None, None]:
        spec, tune = self.spec, self.spec.tune
        chosen: dict[str, Any] = {}
        if tune is not None and spec.variants[self.variant].method is None:
            metric, mode = tune_metric(spec, self.variant, self.point)
            if tune.method == "grid":
                settings = grid_points(tune.space_for(self.variant))
                if len(settings) > 1:  # a one-setting grid (e.g. an untuned variant) has nothing to choose
                    yield [self.job("tune", s, seed) for s in settings for seed in tune_seeds(spec)]
                    chosen = settings[choose(self._rows(settings, metric), mode)]
                else:
                    chosen = settings[0]
            else:
                chosen = yield from self._optuna(metric, mode)
        yield [self.job("final", chosen, seed) for seed in spec.seeds_of(self.variant)]

    def _optuna(self, metric: str, mode: str) -> Generator[list[Job], None, dict[str, Any]]:
        try:
            import optuna
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ConfigError("tune.method 'optuna' needs Optuna: pip install 'embreg[hpo]'") from error
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        distributions = _optuna_space(self.spec, self.variant, self.point)
        study = optuna.create_study(
            direction="minimize" if mode == "min" else "maximize", sampler=optuna.samplers.TPESampler(seed=0)
        )
        tried: list[dict[str, Any]] = []
        for _ in range(self.spec.tune.trials):  # type: ignore[union-attr]
            trial = study.ask(distributions)
            setting = {key: _plain(trial.params[key]) for key in distributions}
            yield [self.job("tune", setting, seed) for seed in tune_seeds(self.spec)]
            value = self._rows([setting], metric)[0].mean
            if math.isfinite(value):
                study.tell(trial, value)
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            if not any(same_point(setting, t) for t in tried):
                tried.append(setting)
        return tried[choose(self._rows(tried, metric), mode)]


def _check(spec: StudySpec, extra: Sequence[str]) -> None:
    """Loads every variant's recipe at every point (and each tuned value once) so a typo fails before training;
    checks the study's metric names against what each variant's task reports (:mod:`embreg.studies.checks`)."""
    from embreg.recipes import load_recipe

    first = spec.seed_start
    for variant, vspec in spec.variants.items():
        for point in [p for p in spec.points() if spec.includes(variant, p)]:
            overrides = run_overrides(spec, variant, point, {}, first, extra)
            if vspec.method is not None:
                from embreg.recipes.baselines import split_options

                load_recipe(vspec.recipe, split_options(overrides)[0])
                check_method_metrics(spec, variant)
                continue
            recipe = load_recipe(vspec.recipe, overrides)
            check_study_metrics(spec, {variant: recipe})
        if vspec.method is None and spec.tune is not None and spec.tune.method == "grid":
            for key, values in spec.tune.space_for(variant).items():
                for value in values:
                    load_recipe(
                        vspec.recipe, run_overrides(spec, variant, spec.points()[0], {key: value}, first, extra)
                    )


def _check_kept(spec: StudySpec, job: Job) -> None:
    """Refuses a kept run's directory that holds another config, in this process and before training."""
    if job.run_dir is None:
        return
    from embreg.recipes import load_recipe

    try:
        check_kept_run(load_recipe(job.recipe, [*job.overrides, "train.progress=false"]), job.run_dir)
    except ConfigError as error:
        raise ConfigError(
            f"study {spec.name}: the final run {job.variant!r} (point {job.point}, seed {job.seed}) is kept in "
            f"{job.run_dir} (keep_runs), which holds another run: {error}. Move that directory away, or give "
            "keep_runs another folder"
        ) from None


# --------------------------------------------------------------------------------------------------- the runner


def run_study(
    spec: StudySpec,
    log_path: str | Path,
    *,
    workers: int = 1,
    extra_overrides: Sequence[str] = (),
    progress: bool = True,
) -> list[RunRecord]:
    """Runs (or resumes) ``spec`` into the run log ``log_path``; returns every record of the log.

    Args:
        spec: the study.
        log_path: its JSON-lines run log (created if missing; runs already in it are skipped).
        workers: processes training at once (``1``: in this process).
        extra_overrides: ``--set`` values added after every run's own (recorded with each run).
        progress: show a progress bar over runs.

    Raises:
        LogLockedError: another runner is using the log.
        ConfigError: a variant's recipe or overrides are invalid (checked before any training), or a kept run's
            directory (``spec.keep_runs``) holds a run of another config (checked before that run trains).
        StudyRunError: a run failed (the runs in flight were finished and logged first).
    """
    from embreg.progress import progress as progress_bar

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers={workers!r} must be an integer >= 1")
    extra = list(extra_overrides)
    log = RunLog(log_path)
    with lock_log(log.path):
        _check(spec, extra)
        log.drop_torn_tail()
        done = {record.key: record for record in log.read()}
        cells = [_Cell(spec, variant, point, extra, done) for variant, point in spec.cells()]
        waiting: deque[_Cell] = deque(cells)
        in_flight: dict[Future, tuple[_Cell, Job]] = {}
        failure: tuple[Job | None, BaseException] | None = None
        executor: _Inline | _Pool = _Inline() if workers == 1 else _Pool(workers)
        bar = progress_bar(planned_runs(spec), spec.name, unit="runs", enabled=progress)

        def advance(cell: _Cell) -> None:
            """Moves ``cell`` on to its next batch with work left, submitting that work."""
            while True:
                try:
                    batch = next(cell.steps)
                except StopIteration:
                    return
                missing = [job for job in batch if job.key not in done]
                bar.update(len(batch) - len(missing))
                if missing:
                    for job in missing:
                        _check_kept(spec, job)
                    cell.pending = {job.key for job in missing}
                    for job in missing:
                        future = executor.submit(execute, job.recipe, job.overrides, job.run_dir, job.method)
                        in_flight[future] = (cell, job)
                    return

        def fill() -> None:
            nonlocal failure
            while failure is None and waiting and len(in_flight) < workers:
                try:
                    advance(waiting.popleft())
                except Exception as exc:
                    failure = (None, exc)

        interrupted = True
        try:
            fill()
            while in_flight:
                for future in executor.next_done(in_flight):
                    cell, job = in_flight.pop(future)
                    if future.cancelled():
                        continue
                    error = future.exception()
                    if error is not None:
                        if failure is None:
                            failure = (job, error)
                            bar.write(
                                f"{spec.name}: run failed, stopping after the runs in flight: "
                                f"{type(error).__name__}: {error}\n  {job.command()}",
                                file=sys.stderr,
                            )
                            for other in in_flight:
                                other.cancel()
                        continue
                    metrics, seconds, machine = future.result()
                    record = RunRecord(
                        spec.name,
                        job.variant,
                        dict(job.point),
                        job.phase,
                        dict(job.setting),
                        job.seed,
                        list(job.overrides),
                        job.recipe,
                        metrics,
                        seconds,
                        machine,
                        run_dir=job.run_dir,
                    )
                    log.append(record)
                    done[record.key] = record
                    bar.update(1)
                    cell.pending.discard(job.key)
                    if failure is None and not cell.pending:
                        try:
                            advance(cell)
                        except Exception as exc:
                            failure = (None, exc)
                fill()
            interrupted = False
        finally:
            executor.shutdown(cancel=interrupted)
            bar.close()
        if failure is not None:
            failed, error = failure
            if failed is None:
                raise error
            raise StudyRunError(
                f"study {spec.name}: run {failed.variant!r} (point {failed.point}, {failed.phase}, setting "
                f"{failed.setting}, seed {failed.seed}) failed: {type(error).__name__}: {error}\n"
                f"  overrides: {' '.join(failed.overrides)}\n  repeat it alone: {failed.command()}\n"
                f"  finished runs are in {log.path}; run the study again to resume"
            ) from error
        return log.read()

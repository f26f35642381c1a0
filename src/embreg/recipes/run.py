"""Running any recipe: one seed into one run directory, or several seeds with a summary. One path for every family.

A run builds, in this order: the task's data (:meth:`TaskAdapter.prepare`), the index transforms of each id kind,
the model (given its transforms and its tables), the objective, the regularisers, then trains with
:class:`~embreg.train.trainer.Trainer`. Its directory gets ``config.yaml`` (the resolved recipe), the task's records
(``split.json`` or ``corpus.json``), ``history.jsonl``, ``best.safetensors``/``last.safetensors`` (as
``train.keep_checkpoints`` says), ``metrics.json``, ``backends.json`` (which backend each C++ kernel took:
:func:`embreg._native.backend_record`), ``report.md`` and ``run.json`` (layout, world size, the config it trains
with, and its status: ``training``, ``finished``, or ``failed`` when training raised
:class:`~embreg.errors.TrainingError`). A directory belongs to one run: another run's files there are refused
unless the run resumes them or overwrites them (:meth:`~embreg.runs.run_dir.RunDirectory.claim`), and a resume
must be the same run (:mod:`embreg.recipes.resume_check`). A finished seed is recognised by its ``metrics.json`` and skipped by
``resume``, so ``--seeds 10 --resume`` extends an earlier 5-seed run; more ``train.epochs`` extend finished seeds.
One run writes into a directory at a time (it holds ``.lock`` there; a second one gets
:class:`~embreg.errors.RunDirectoryLockedError`), and ``train.log_to`` feeds the same records to TensorBoard, a CSV
table or W&B (:mod:`embreg.train.loggers`). Under ``torchrun`` every process trains its shard, and rank 0 alone holds
the lock, writes the directory and feeds the loggers (:mod:`embreg.train.distributed`).

Example:
    >>> from embreg.recipes import load_recipe
    >>> recipe = load_recipe("mf", ["data.max_rows=2000", "train.epochs=1", "train.progress=false"])
    >>> metrics = run_single(recipe, None).metrics
    >>> metrics["epochs_run"], sorted(k for k in metrics if k.startswith("test_"))
    (1, ['test_mae', 'test_mse', 'test_mse_popular', 'test_mse_rare', 'test_rmse'])
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from embreg._native import expected_backends, merged_backend_record
from embreg.config import to_dict
from embreg.errors import ConfigError, DataError, EmbregError, TrainingError
from embreg.id_kinds import build_index_transforms
from embreg.optim.inverse_sqrt import inverse_sqrt_optimizer
from embreg.optim.optimizers import check_sparse_gradients, optimizer_factory
from embreg.optim.schedules import scheduler_factory
from embreg.optim.warmup import warmup_adamw_factory
from embreg.recipes.context import BuildContext
from embreg.recipes.ensembles import ensemble_metrics, snapshot_callbacks
from embreg.recipes.recipe import Recipe
from embreg.recipes.resume_check import check_resume, check_seed_count, extends_finished_run, run_record
from embreg.recipes.seed_series import run_seed_series
from embreg.runs.run_dir import CONFIG, RUN_RECORD, RunDirectory
from embreg.runs.run_layout import FINISHED_KEY
from embreg.tasks.data_files import data_line
from embreg.train.distributed import broadcast_from_main, current
from embreg.train.finite import check_final_metrics
from embreg.train.loggers import RunLoggers, build_loggers
from embreg.train.seeding import seed_everything
from embreg.train.snapshots import schedule_settings
from embreg.train.trainer import EpochCallback, FitResult, StepCallback, Trainer

__all__ = ["run_single", "run_seeds", "build_run", "BuiltRun", "load_metrics", "FINISHED_KEY"]


BACKENDS = "backends.json"
"""Which backend each C++ kernel took over the whole run (:func:`embreg._native.merged_backend_record`)."""


class _BackendsWriter:
    """A step callback writing ``backends.json`` after the first step of each session, once the kernels the run
    uses have been asked for: an interrupted run keeps the backends its swaps were drawn with, which its resume
    must take again (:func:`embreg._native.expected_backends`)."""

    def __init__(self, files: RunDirectory, earlier: dict[str, Any] | None) -> None:
        self.files, self.earlier, self.written = files, earlier, False

    def __call__(self, trainer: Trainer, record: dict[str, Any]) -> None:
        if not self.written:
            self.files.write_record(BACKENDS, merged_backend_record(self.earlier))
            self.written = True


class BuiltRun:
    """Everything one seed of a recipe trains with (built by :func:`build_run`).

    Attributes:
        recipe, prepared, model, objective, regularizers, batches, evaluator, context.
    """

    def __init__(
        self,
        recipe: Recipe,
        prepared: Any,
        model: torch.nn.Module,
        objective: Any,
        regularizers: list[Any],
        batches: Any,
        evaluator: Any,
        context: BuildContext,
    ) -> None:
        self.recipe, self.prepared, self.model = recipe, prepared, model
        self.objective, self.regularizers = objective, regularizers
        self.batches, self.evaluator, self.context = batches, evaluator, context

    def trainer(
        self, run_dir: Path | None, callbacks: Sequence[EpochCallback] = (), step_callbacks: Sequence[StepCallback] = ()
    ) -> Trainer:
        """The trainer of this run (the regularisers' ``prepare`` runs here, before the optimizer is built).

        Args:
            run_dir: the run directory (``None``: keep nothing on disk).
            callbacks: called as ``cb(trainer, record)`` after each epoch (e.g. the run's loggers).
            step_callbacks: called as ``cb(trainer, record)`` after each step (the loggers' per-step records).

        Raises:
            ConfigError: the model has sparse tables (``embeddings.sparse=true``) and the train section cannot take
                their gradients (a dense-only optimizer such as ``adam``: use ``train.optimizer=sparse-adam``;
                weight decay; gradient clipping), or ``train.schedule='linear'`` without ``adamw``.
        """
        t = self.recipe.train
        metric, mode = self.recipe.monitor
        check_sparse_gradients(self.model, t.optimizer, weight_decay=t.weight_decay, clip_norm=t.clip_norm)
        if t.schedule == "linear":
            if t.optimizer != "adamw":
                raise ConfigError(f"train.schedule='linear' runs with train.optimizer='adamw', got {t.optimizer!r}")
            optimizer = warmup_adamw_factory(t.lr, t.epochs * len(self.batches), t.warmup, t.weight_decay)
        elif t.schedule == "inverse-sqrt":
            optimizer = inverse_sqrt_optimizer(t, len(self.batches))
        else:
            optimizer = optimizer_factory(t.optimizer, t.lr, t.weight_decay)
        callbacks = [*callbacks, *snapshot_callbacks(t, run_dir)]
        return Trainer(
            self.model,
            optimizer,
            self.batches,
            self.evaluator,
            epochs=t.epochs,
            monitor=metric,
            mode=mode,
            patience=t.patience,
            min_epochs=t.min_epochs,
            clip_norm=t.clip_norm,
            regularizers=self.regularizers,
            objective=self.objective,
            run_dir=run_dir,
            progress=t.progress,
            callbacks=list(callbacks),
            step_callbacks=list(step_callbacks),
            device=t.device,
            precision=t.precision,
            fused_step=t.fused_step,
            index_transforms_on=t.index_transforms_on,
            scheduler=scheduler_factory(t.schedule, epochs=t.epochs, settings=schedule_settings(t)),
            **self.recipe.adapter.trainer_options(self.recipe),
        )


def build_run(recipe: Recipe, prepared: Any | None = None, *, model_only: bool = False) -> BuiltRun:
    """Builds data (unless ``prepared`` is given), transforms, model, objective, regularisers, batches, evaluator.

    Global random generators are seeded with ``train.seed`` before the data and again before the model, so the
    model's initialisation does not depend on whether the data was shared between seeds. ``model_only`` (serving a
    trained model) leaves out what only training needs: the objective, the batches and the evaluator are ``None``.
    """
    t = recipe.train
    if t.threads is not None:
        torch.set_num_threads(t.threads)
    adapter = recipe.adapter
    if prepared is None:
        seed_everything(t.seed)
        prepared = adapter.prepare(recipe)
    seed_everything(t.seed)
    context = BuildContext(recipe, prepared, t.seed)
    context.transforms = build_index_transforms(recipe, context)
    model = recipe.model
    if model is None:  # Recipe.__post_init__ fills it with the task's default model
        raise ConfigError(f"recipe {recipe.name!r} has no model")
    context.model = model.build(context)
    context.objective = None if model_only else recipe.objective.build(context)
    regularizers = [spec.build(context) for spec in recipe.regularizers]
    return BuiltRun(
        recipe,
        prepared,
        context.model,
        context.objective,
        regularizers,
        None if model_only else adapter.batches(recipe, prepared),
        None if model_only else adapter.evaluator(recipe, prepared),
        context,
    )


def parameter_counts(model: torch.nn.Module) -> dict[str, int]:
    """``model_parameters`` (every parameter) and ``embedding_parameters`` (those of the embedding tables, mixed-
    dimension projections included), as the mixed-dimension paper counts a model's size."""
    from embreg.regularizers.embedding_noise import embedding_modules

    own = getattr(model, "embedding_parameter_count", None)  # models with bias tables say which tables count
    if callable(own):
        tables = int(own())
    else:
        tables = sum(p.numel() for _, module in embedding_modules(model) for p in module.parameters())
    return {"model_parameters": sum(p.numel() for p in model.parameters()), "embedding_parameters": tables}


def _finished(run_dir: Path | None, recipe: Recipe | None = None) -> dict[str, Any] | None:
    """The metrics of the finished run in ``run_dir`` (``None``: not finished, or ``recipe`` extends it)."""
    files = RunDirectory(run_dir) if run_dir is not None else None
    metrics = files.read_metrics() if files is not None else None
    if files is None or metrics is None or FINISHED_KEY not in metrics:
        return None
    return None if recipe is not None and extends_finished_run(files, to_dict(recipe)) else metrics


def _checked_on_main(check: Callable[[], None]) -> None:
    """Runs ``check`` on rank 0 and raises its error on every rank (alone: just runs it)."""
    env = current()
    if not env.active:
        check()
        return
    error: EmbregError | None = None
    if env.is_main:
        try:
            check()
        except EmbregError as exc:
            error = exc
    error = broadcast_from_main(error, env)
    if error is not None:
        raise error


def _claim(files: RunDirectory, recipe: Recipe, *, layout: str, resume: bool, overwrite: bool) -> None:
    """The run directory's checks before anything is written: ownership (:meth:`RunDirectory.claim`), then, on
    resume, the stored config, layout and world size (:func:`embreg.recipes.resume_check.check_resume`)."""
    files.claim(resume=resume, overwrite=overwrite)
    if resume:
        check_resume(files, recipe, layout=layout, world_size=current().world_size)


def run_single(
    recipe: Recipe,
    out_dir: str | Path | None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    prepared: Any | None = None,
) -> FitResult:
    """Trains ``recipe`` once with ``train.seed``; see the module docstring for what ``out_dir`` receives.

    Args:
        recipe: the recipe.
        out_dir: the run directory (``None``: keep nothing on disk). It must hold no other run's files, unless
            ``resume`` or ``overwrite`` says what to do with them.
        resume: continue the run in ``out_dir`` (it starts afresh where there is none). Its stored config must
            match ``recipe`` but for the keys :mod:`embreg.recipes.resume_check` allows; a finished run is
            returned as it is, unless ``train.epochs`` grew and it had used up its epochs: then it trains them.
        overwrite: delete the run in ``out_dir`` first (refused where ``out_dir`` holds files no run writes).
        prepared: the task's data, to share it between seeds (prepared from the recipe when ``None``).

    Raises:
        RunDirectoryLockedError: another run is writing into ``out_dir`` (it holds ``out_dir/.lock`` for its whole
            run); nothing is written.
        RunDirectoryInUseError: ``out_dir`` holds another run's files and neither ``resume`` nor ``overwrite`` is
            set, or ``overwrite`` meets files that are not a run's; nothing is written or deleted.
        ConfigError: ``resume`` and ``overwrite`` together, or a resume that is not the same run (a config key that
            may not change, another layout or world size, more epochs without ``last.safetensors``); nothing is
            written.
        TrainingError: training diverged, or the run's final monitored metric or its test twin is not finite
            (:func:`embreg.train.finite.check_final_metrics`); the run is then not marked finished.
    """
    main = current().is_main  # under DDP only rank 0 writes, so only it locks and logs
    with contextlib.ExitStack() as stack:
        if out_dir is not None and main:
            stack.enter_context(RunDirectory(out_dir).lock())
        if out_dir is not None:
            files = RunDirectory(out_dir)
            _checked_on_main(lambda: _claim(files, recipe, layout="single", resume=resume, overwrite=overwrite))
        loggers = stack.enter_context(
            build_loggers(
                recipe.train.log_to if main else [],
                out_dir if main else None,
                run_name=f"{recipe.name}-seed{recipe.train.seed}",
                config=to_dict(recipe),
                log_every=recipe.train.log_every,
            )
        )
        return _run_single(recipe, out_dir, resume=resume, prepared=prepared, loggers=loggers)


def _run_single(
    recipe: Recipe, out_dir: str | Path | None, *, resume: bool, prepared: Any | None, loggers: RunLoggers
) -> FitResult:
    env = current()
    run_dir = Path(out_dir) if out_dir is not None else None
    files = RunDirectory(run_dir) if run_dir is not None else None
    done = broadcast_from_main(_finished(run_dir, recipe) if resume else None, env)  # every rank decides alike
    if done is not None and files is not None:
        return FitResult(metrics=done, history=files.read_history())
    started = time.perf_counter()
    built = build_run(recipe, prepared)
    if files is not None and env.is_main:
        files.write_config(to_dict(recipe))
        files.write_run_record(run_record("single", env.world_size, to_dict(recipe)))
        for name, record in recipe.adapter.records(recipe, built.prepared).items():
            files.write_record(name, record)
    earlier = files.read_record(BACKENDS) if files is not None and resume else None
    record_backends = [] if files is None or not env.is_main else [_BackendsWriter(files, earlier)]
    with _failure_recorded(files):  # a run that diverged or scored NaN is failed, not finished
        trainer = built.trainer(run_dir, loggers.callbacks(), [*loggers.step_callbacks(), *record_backends])
        with expected_backends(earlier or {}):  # a resumed run draws on the backends its earlier sessions drew with
            result = trainer.fit(resume=resume)
        metrics = None
        if env.is_main:  # the task's extra evaluations run once, like the trainer's; rank 0's metrics are the run's
            metrics = recipe.adapter.finish(recipe, built.prepared, trainer, built.evaluator, dict(result.metrics))
            metrics.update(ensemble_metrics(recipe, trainer, built.evaluator, run_dir))
            steps = len(trainer.batches) * len(result.history)
            train_seconds = sum(record["seconds"] for record in result.history)
            metrics.update(parameter_counts(built.model))
            metrics.update(
                train_seconds=train_seconds,
                seconds_per_step=train_seconds / max(steps, 1),
                wall_seconds=time.perf_counter() - started,
            )
            if env.active:
                metrics["world_size"] = env.world_size
        metrics = broadcast_from_main(metrics, env)
        # a run that scored NaN is not finished
        check_final_metrics(metrics, recipe.monitor[0], trainer.model, recipe.train.lr)
    if files is not None and env.is_main:
        files.write_record(BACKENDS, merged_backend_record(earlier))  # the SSE backends draw different streams
        files.write_metrics(metrics)
        files.write_report(_report(recipe, metrics, recipe.adapter.data_used(recipe, built.prepared)))
        files.drop_checkpoints(recipe.train.keep_checkpoints)
        files.write_status("finished")
    loggers.log_final(metrics)
    return FitResult(metrics=metrics, history=result.history)


@contextlib.contextmanager
def _failure_recorded(files: RunDirectory | None) -> Iterator[None]:
    """Marks the run ``failed`` in ``run.json`` (with the error) when training raises :class:`TrainingError`, so
    serving refuses it (:mod:`embreg.serving.run_checks`); the error goes on."""
    try:
        yield
    except TrainingError as exc:
        if files is not None and current().is_main:
            files.write_status("failed", str(exc))
        raise


def run_seeds(
    recipe: Recipe, out_dir: str | Path, seeds: int, *, resume: bool = False, overwrite: bool = False
) -> dict[str, dict]:
    """Runs seeds ``train.seed .. train.seed + seeds - 1`` into ``out_dir/seed-<s>``; writes ``summary.json``.

    The task's data is prepared once and shared by every seed. With ``resume`` finished seeds are read back (so
    ``seeds`` may grow), once the stored config of the series, and then of each seed, is checked against
    ``recipe`` as :func:`run_single` checks it (fewer ``seeds`` than the run holds are refused:
    :func:`~embreg.recipes.resume_check.check_seed_count`); with ``overwrite`` the earlier run in ``out_dir`` is
    deleted first.
    ``out_dir`` is locked for the whole series and each seed's directory for its run
    (:class:`~embreg.errors.RunDirectoryLockedError` when another run holds either).

    Raises:
        RunDirectoryInUseError, ConfigError: as :func:`run_single`, for ``out_dir`` as a whole.
    """
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ConfigError(f"seeds={seeds!r} must be an integer >= 1")
    shared: list[Any] = []

    def run_one(seed_recipe: Recipe, seed_dir: Path) -> FitResult:
        if not shared and not (resume and _finished(seed_dir, seed_recipe)):
            seed_everything(recipe.train.seed)
            shared.append(recipe.adapter.prepare(recipe))
        return run_single(seed_recipe, seed_dir, resume=resume, prepared=shared[0] if shared else None)

    files = RunDirectory(out_dir)

    def claim() -> None:
        _claim(files, recipe, layout="seeds", resume=resume, overwrite=overwrite)
        if resume:
            check_seed_count(files, recipe.train.seed, seeds)

    with files.lock() if current().is_main else contextlib.nullcontext():
        _checked_on_main(claim)
        try:
            return run_seed_series(recipe, out_dir, seeds, run_one)
        except BaseException:
            if not resume and current().is_main:
                _forget_unstarted_series(files)
            raise


def _forget_unstarted_series(files: RunDirectory) -> None:
    """Removes the series' ``config.yaml`` and ``run.json`` when no seed has written anything yet, so that a
    series refused while its data or first model was built (a size the file cannot hold, a model too big) leaves
    the directory as a refused single run does, and the corrected command needs no ``--overwrite``."""
    if any(seed.is_dir() and any(seed.iterdir()) for seed in files.path.glob("seed-*")):
        return
    for name in (CONFIG, RUN_RECORD):
        files.file(name).unlink(missing_ok=True)


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _report(recipe: Recipe, metrics: dict[str, Any], data: dict[str, Any] | None = None) -> str:
    """``report.md``: the recipe, the data it used (a user's file by path, sha256 and rows), techniques, metrics."""
    rows = "\n".join(f"| {k} | {_fmt(v)} |" for k, v in metrics.items())
    used_data = data_line(data)
    techniques = [f"{kind}: {spec.name}" for kind, spec in recipe.index_transforms.items()]
    techniques += [spec.name for spec in recipe.regularizers]
    if recipe.objective.name != "standard":
        techniques.append(f"objective {recipe.objective.name}")
    used = ", ".join(techniques) or "none"
    model = recipe.model.name if recipe.model is not None else "none"
    return (
        f"# {recipe.name}\n\n{recipe.description}\n\ntask `{recipe.task}`, model `{model}`, "
        f"embeddings `{recipe.embeddings.name}`, techniques: {used}; seed {recipe.train.seed}\n\n"
        + (f"{used_data}\n\n" if used_data else "")
        + f"| metric | value |\n|---|---|\n{rows}\n\nconfig: `config.yaml`, per-epoch history: `history.jsonl`\n"
    )


def load_metrics(run_dir: str | Path) -> dict[str, Any]:
    """The ``metrics.json`` of a finished single-seed run.

    Raises:
        DataError: the directory holds no ``metrics.json``.
    """
    metrics = RunDirectory(run_dir).read_metrics()
    if metrics is None:
        raise DataError(f"{run_dir} holds no metrics.json: the run has not finished")
    return metrics

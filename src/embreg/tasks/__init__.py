"""Task adapters: one per task, each in one place, registered under the ``task`` slot.

A task adapter turns a :class:`~embreg.recipes.recipe.Recipe`'s ``data`` section into prepared data, training
batches and an evaluator, says which metric picks the best epoch, which id kinds exist for index transforms, and
what else a run directory records. Every family runs through the same runner (:mod:`embreg.recipes.run`).

=================  =====================================  ===========================================
task               data                                   models
=================  =====================================  ===========================================
rating             ratings (ml-100k or your file)         mf, ncf
ranking            implicit feedback (ml-100k or file)    bpr
ctr                click tables (adult, ml-100k-ctr, ...) dlrm
lm                 text (enwiki-gensim or your files)     lstm-lm
next-item          timed interactions (ml-100k or file)   sasrec (SSE-PT: sasrec with user_dim)
classification     labelled texts (reviews, polarity,     encoder-classifier, text-cnn, bilstm-attn
regression         or your CSV/TSV/parquet)
mlm                texts (reviews, enwiki-gensim, or      encoder-mlm
                   your text file, one text per line)
tagging            CoNLL files (or silver-tagged reviews) bilstm-crf
translation        sentence pairs (trans-de-en or your    transformer-nmt
                   tab-separated pairs file)
=================  =====================================  ===========================================

Example:
    >>> from embreg.registry import REGISTRY
    >>> sorted(REGISTRY.names("task"))
    ['classification', 'ctr', 'lm', 'mlm', 'next-item', 'ranking', 'rating', 'regression', 'tagging', 'translation']
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from embreg.errors import ConfigError
from embreg.id_kinds import id_kind_base
from embreg.registry import REGISTRY, missing_capabilities, register

__all__ = [
    "TaskAdapter",
    "register_task",
    "check_split",
    "check_max_rows",
    "model_id_kinds",
    "RUN_METRICS",
    "TASK_TRAIN_FIELDS",
]

TASK_TRAIN_FIELDS = {
    "num_negatives": "sampled negatives per positive",
    "eval_train": "scoring the training split each epoch",
}
"""The ``train`` fields only some tasks read (each task names its own in :attr:`TaskAdapter.train_fields`)."""

RUN_METRICS = (
    "best_epoch",
    "epochs_run",
    "model_parameters",
    "embedding_parameters",
    "train_seconds",
    "seconds_per_step",
    "wall_seconds",
    "world_size",
)
"""Keys every run's ``metrics.json`` holds whatever its task (``world_size`` only under ``torchrun``)."""


class TaskAdapter(ABC):
    """The methods every task implements (see the module docstring); defaults where a task has nothing to add.

    Attributes:
        name: the task name.
        data_config: the dataclass of its ``data`` section.
        default_model: the model a recipe gets when it names none.
        train_defaults: values of the ``train`` section this family starts from.
        id_kinds: the id kinds of this task's data that index transforms may act on.
        smoke_overrides: ``key=value`` overrides that shrink a recipe of this task to a few-second run on a small
            slice of its real data (read by the registry test matrix, tests/test_registry_matrix.py).
        headline: the test metrics ``embreg compare`` shows by default, most important first (those a run lacks
            are left out).
        train_fields: the task-specific ``train`` fields this task reads (of :data:`TASK_TRAIN_FIELDS`); the others
            are refused when set away from their defaults, since the task would ignore them.
    """

    name: str = ""
    data_config: type = object
    default_model: str = ""
    train_defaults: dict[str, Any] = {}
    id_kinds: tuple[str, ...] = ()
    smoke_overrides: tuple[str, ...] = ()
    headline: tuple[str, ...] = ()
    train_fields: tuple[str, ...] = ()

    # -- checks made when a recipe is loaded --------------------------------------------------------------------
    def check(self, recipe: Any) -> None:
        """Refuses a model of another task, an id kind this task does not have, and techniques whose requirements
        the model does not provide."""
        model = recipe.model.entry
        if self.name not in model.extra.get("tasks", ()):
            serving = [m for m, e in REGISTRY.entries("model").items() if self.name in e.extra.get("tasks", ())]
            raise ConfigError(
                f"model {model.name!r} does not serve task {self.name!r}; models for it: {', '.join(serving)}"
            )
        model_kinds = model_id_kinds(model, recipe.model.config)
        for key, spec in recipe.index_transforms.items():
            kind = id_kind_base(key)  # field:<name> is a field id kind; the name is checked against the data
            if kind not in self.id_kinds:
                raise ConfigError(
                    f"index_transforms.{key}: task {self.name!r} has no {kind!r} ids; it has "
                    f"{', '.join(self.id_kinds) or 'none'}"
                )
            if kind not in model_kinds:
                hint = model.extra.get("kinds_hint", {}).get(kind)
                raise ConfigError(
                    f"index_transforms.{key}: model {model.name!r} takes no index transform on "
                    f"{kind!r} ids (it takes {', '.join(model_kinds) or 'none'})" + (f"; {hint}" if hint else "")
                )
            transform_kinds = spec.entry.extra.get("kinds", ())
            if transform_kinds and kind not in transform_kinds:
                raise ConfigError(
                    f"index_transforms.{key}: {spec.name!r} acts on {', '.join(transform_kinds)} ids only"
                )
        provides = model.provides
        techniques = [("objective", recipe.objective)] + [
            (f"regularizers[{i}]", spec) for i, spec in enumerate(recipe.regularizers)
        ]
        for where, spec in techniques:
            missing = missing_capabilities(spec.entry.requires, provides)
            if missing:
                raise ConfigError(
                    f"{where}: {spec.entry.slot.replace('_', ' ')} {spec.name!r} needs {', '.join(missing)}, which "
                    f"model {model.name!r} does not provide (it provides: {', '.join(provides) or 'nothing'})"
                )
            tasks = spec.entry.extra.get("tasks")
            if tasks is not None and self.name not in tasks:
                raise ConfigError(
                    f"{where}: {spec.entry.slot.replace('_', ' ')} {spec.name!r} serves the {', '.join(tasks)} "
                    f"task{'s' if len(tasks) > 1 else ''} only, not task {self.name!r}"
                )
            objectives = spec.entry.extra.get("objectives")
            if objectives is not None and recipe.objective.name not in objectives:
                raise ConfigError(
                    f"{where}: {spec.name!r} works with objective {' or '.join(objectives)}, not "
                    f"{recipe.objective.name!r} (set objective: {{name: {objectives[0]}}})"
                )
        self._check_train_fields(recipe)
        self.check_data(recipe)

    def _check_train_fields(self, recipe: Any) -> None:
        """Refuses a task-specific ``train`` field this task does not read, set away from its default."""
        defaults = {f.name: f.default for f in dataclasses.fields(recipe.train)}
        for name, purpose in TASK_TRAIN_FIELDS.items():
            value = getattr(recipe.train, name)
            if name not in self.train_fields and value != defaults[name]:
                readers = [e.name for e in REGISTRY.entries("task").values() if name in e.extra["adapter"].train_fields]
                raise ConfigError(
                    f"train.{name}={value!r} ({purpose}) is not used by task {self.name!r}, only by "
                    f"{', '.join(readers)}; remove it"
                )

    def check_data(self, recipe: Any) -> None:  # noqa: B027 - optional hook, empty by default
        """Task-specific consistency checks of a loaded recipe."""

    @abstractmethod
    def monitor(self, recipe: Any) -> tuple[str, str]:
        """``(validation metric, "min" | "max")`` that picks the best epoch."""

    # -- the metrics a run reports -----------------------------------------------------------------------------
    def evaluated_metrics(self, recipe: Any) -> tuple[str, ...]:
        """The evaluator's metric names, unprefixed (``rmse``); the trainer reports them as ``val_``/``test_``."""
        return ()

    def extra_metric_names(self, recipe: Any) -> tuple[str, ...]:
        """The keys :meth:`finish` adds to the trainer's metrics (e.g. ``test_mse_popular``)."""
        return ()

    def metric_names(self, recipe: Any) -> tuple[str, ...]:
        """Every key a run of ``recipe`` can write into ``metrics.json``, read from the recipe alone (no data is
        loaded): :data:`RUN_METRICS`, ``val_``/``test_`` of :meth:`evaluated_metrics`,
        :meth:`extra_metric_names`, and the averaged model's and snapshot ensemble's keys where the recipe asks for
        them (:func:`embreg.train.snapshots.ensemble_metric_names`). A run may lack some (``world_size`` outside
        ``torchrun``), never have more.

        Example:
            >>> from embreg.recipes import load_recipe
            >>> recipe = load_recipe("mf")
            >>> "test_rmse" in recipe.adapter.metric_names(recipe), "test_ndcg@10" in recipe.adapter.metric_names(recipe)
            (True, False)
        """
        from embreg.train.snapshots import ensemble_metric_names

        evaluated = self.evaluated_metrics(recipe)
        split_keys = [f"{split}_{name}" for split in ("val", "test") for name in evaluated]
        ensembles = ensemble_metric_names(recipe.train, evaluated)  # train.average_checkpoints, snapshot_ensemble
        return tuple(dict.fromkeys([*RUN_METRICS, *split_keys, *self.extra_metric_names(recipe), *ensembles]))

    def headline_metrics(self) -> tuple[str, ...]:
        """The test metrics ``embreg compare`` shows by default (:attr:`headline`)."""
        return tuple(self.headline)

    # -- building a run ----------------------------------------------------------------------------------------
    @abstractmethod
    def prepare(self, recipe: Any) -> Any:
        """Loads and splits the data named by ``recipe.data``."""

    def expand_id_kind(self, prepared: Any, kind: str) -> tuple[str, ...]:
        """The id kinds one ``index_transforms`` key builds a transform for (itself; ``ctr``: ``field`` -> one
        ``field:<name>`` per field)."""
        return (kind,)

    def num_ids(self, prepared: Any, kind: str) -> int:
        raise ConfigError(f"task {self.name!r} has no {kind!r} ids")

    def excluded_ids(self, prepared: Any, kind: str) -> tuple[int, ...]:
        """Ids of ``kind`` that index transforms must neither swap nor draw (a tokenizer's special ids)."""
        return ()

    def frequencies(self, prepared: Any, kind: str) -> Any:
        raise ConfigError(f"task {self.name!r} has no training counts of {kind!r} ids")

    def graph(self, prepared: Any, kind: str, name: str, relations: Any) -> Any:
        raise ConfigError(f"task {self.name!r} has no {name!r} graph over {kind!r} ids")

    @abstractmethod
    def batches(self, recipe: Any, prepared: Any) -> Any:
        """Training batches (``len()`` and ``epoch(e)``)."""

    @abstractmethod
    def evaluator(self, recipe: Any, prepared: Any) -> Any:
        """``evaluator(model, split) -> {metric: value}``."""

    def records(self, recipe: Any, prepared: Any) -> dict[str, Any]:
        """JSON files the run directory gets besides the trainer's (``{"split.json": {...}}``)."""
        return {}

    def serving_data(self, recipe: Any, read_record: Callable[[str], Any]) -> Any | None:
        """Data enough to rebuild and serve a trained model without preparing the data set again, from the records
        the run wrote (``read_record(name)``: a JSON record of the run directory, ``None`` if missing); ``None``
        (the default): :func:`embreg.serving.load` prepares the data as training did."""
        return None

    def data_used(self, recipe: Any, prepared: Any) -> dict[str, Any] | None:
        """What the run's data was, for its report: a user's file (``path``, ``sha256``, ``rows_read``, ``rows``,
        ...; :func:`embreg.tasks.data_files.file_record`) or a dataset (``dataset``, ``rows``)."""
        return None

    def finish(
        self, recipe: Any, prepared: Any, trainer: Any, evaluator: Any, metrics: dict[str, Any]
    ) -> dict[str, Any]:
        """Metrics added after training (e.g. training-split metrics and generalisation gaps)."""
        return metrics

    def trainer_options(self, recipe: Any) -> dict[str, Any]:
        """Further :class:`~embreg.train.trainer.Trainer` keywords."""
        return {}


def model_id_kinds(entry: Any, config: Any) -> tuple[str, ...]:
    """The id kinds a registered model takes index transforms on: its ``kinds_for(config)`` where the kinds depend
    on its configuration (SASRec takes user ids only with a user embedding), else its ``kinds``."""
    kinds_for = entry.extra.get("kinds_for")
    return tuple(kinds_for(config)) if kinds_for is not None else tuple(entry.extra.get("kinds", ()))


def check_split(split: list[float], key: str = "data.split") -> None:
    """Raises :class:`ConfigError` unless ``split`` is three positive fractions summing to 1 (train/valid/test)."""
    if len(split) != 3 or any(f <= 0 for f in split) or abs(sum(split) - 1) > 1e-6:
        raise ConfigError(f"{key}={split} must be three positive fractions summing to 1")


def check_max_rows(max_rows: int | None) -> None:
    """Raises :class:`ConfigError` unless ``max_rows`` is ``None`` or at least 10."""
    if max_rows is not None and max_rows < 10:
        raise ConfigError(f"data.max_rows={max_rows} must be >= 10 or null")


def register_task(adapter: TaskAdapter, summary: str, reference: str = "") -> TaskAdapter:
    """Registers ``adapter`` under the ``task`` slot (its config is the data section's dataclass)."""
    provides = tuple(f"ids:{kind}" for kind in adapter.id_kinds)
    register(
        "task",
        adapter.name,
        config=adapter.data_config,
        summary=summary,
        reference=reference,
        provides=provides,
        adapter=adapter,
        data_config=adapter.data_config,
        default_model=adapter.default_model,
        train_defaults=dict(adapter.train_defaults),
    )(adapter.prepare)
    return adapter

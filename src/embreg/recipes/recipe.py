"""The one recipe grammar every model family uses.

```yaml
name: ncf-r3f
description: NCF with R3F noise on its embeddings
task: rating                      # a registered task: rating, ranking, ctr, lm, classification, regression
data: {dataset: ml-100k}          # the task's own data section (a user's file: data.path=...)
model: {name: ncf, dim: 64}       # a registered model and its arguments
embeddings: {name: uniform}       # how embedding tables are built: uniform or md (mixed dimensions)
index_transforms:                 # per id kind (user, item, token, label, field[:<name>]): an index transform
  item: {name: sse-se, p: 0.01}
objective: {name: standard}       # or dropout-k, distill
regularizers:                     # registered regularisers, applied in order
  - {name: r3f, weight: 1.0, sigma: 1.0e-3}
train: {epochs: 20, lr: 0.002}    # one train section for every family (the task supplies its defaults)
search:                           # embreg sweep: dotted key -> search dimension
  train.lr: {type: log_float, low: 1.0e-4, high: 1.0e-2}
```

Every ``{name: ..., ...}`` section is checked against its registry entry's config dataclass, so an unknown name or
argument is an error naming the closest valid one, before anything trains. ``embreg show RECIPE`` prints a recipe
with every default filled in.

Example:
    >>> from embreg.recipes import load_recipe
    >>> recipe = load_recipe("ncf", ["regularizers=[{name: r3f, sigma: 0.001}]"])
    >>> recipe.model.name, recipe.regularizers[0].name, recipe.regularizers[0].sigma
    ('ncf', 'r3f', 0.001)
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from embreg.config import from_dict, to_dict
from embreg.errors import ConfigError
from embreg.id_kinds import check_id_kinds
from embreg.optim.schedules import check_schedule_settings
from embreg.recipes.accepts import check_model_accepts, check_tables_reached
from embreg.recipes.allocation import refuse_allocation_failure
from embreg.recipes.no_ops import warn_no_op
from embreg.registry import REGISTRY, Entry
from embreg.train.device import check_precision, resolve_device
from embreg.train.loggers import check_logger_names
from embreg.train.snapshots import check_ensemble_settings, schedule_settings

__all__ = [
    "Component",
    "ModelSpec",
    "EmbeddingsSpec",
    "TransformSpec",
    "ObjectiveSpec",
    "RegularizerSpec",
    "TrainConfig",
    "SearchParam",
    "Recipe",
    "ID_KINDS",
]

MAX_LR = 1000.0
"""The largest ``train.lr`` a recipe may set. The largest rate an embreg task starts from is the LSTM LM's SGD at 30
(Merity et al.'s AWD-LSTM); a rate above 1000 is a slip (``1e3`` for ``1e-3``), never a setting, and from about
3e37 Adam's first step (``lr / (1 - beta1)``) no longer fits a float32, which torch reports as an overflow."""

ID_KINDS = ("user", "item", "token", "label", "field", "source", "target")
"""Id kinds an index transform can act on; a task says which of them it has (``ids:<kind>`` capabilities).
``field`` (a click table's categorical fields) is also written ``field:<name>`` for one field
(:mod:`embreg.id_kinds`)."""


class Component:
    """A registry-backed recipe section ``{name: <registered name>, **arguments}``.

    Attribute access reads the arguments (``spec.sigma``); ``spec.config`` is the typed config dataclass and
    ``spec.entry`` the registry entry. Subclasses fix the slot.
    """

    slot: ClassVar[str] = ""
    default_name: ClassVar[str | None] = None

    def __init__(self, name: str, config: Any | None = None) -> None:
        entry = REGISTRY.get(self.slot, name)
        self.__dict__["name"] = name
        self.__dict__["config"] = config if config is not None else entry.default_config()

    @property
    def entry(self) -> Entry:
        return REGISTRY.get(self.slot, self.name)

    @classmethod
    def __config_from__(cls, value: Any, key: str) -> Component:
        if isinstance(value, str):
            value = {"name": value}
        if not isinstance(value, Mapping):
            raise ConfigError(f"config key {key!r} expects a mapping {{name: ..., ...}}, got {value!r}")
        args = dict(value)
        name = args.pop("name", cls.default_name)
        if name is None:
            raise ConfigError(
                f"config key {key!r} needs a 'name' (registered {cls.slot.replace('_', ' ')}s: "
                f"{', '.join(REGISTRY.names(cls.slot))})"
            )
        try:
            entry = REGISTRY.get(cls.slot, str(name))
        except ConfigError as exc:
            raise ConfigError(f"{key}.name: {exc}") from None
        return cls(entry.name, from_dict(entry.config, args, path=key))

    def __config_to__(self) -> dict[str, Any]:
        return {"name": self.name, **to_dict(self.config)}

    def __getattr__(self, item: str) -> Any:
        config = self.__dict__.get("config")
        if config is not None and item in {f.name for f in dataclasses.fields(config)}:
            return getattr(config, item)
        raise AttributeError(f"{type(self).__name__} {self.__dict__.get('name')!r} has no argument {item!r}")

    def __setattr__(self, item: str, value: Any) -> None:
        if item in {f.name for f in dataclasses.fields(self.config)}:
            setattr(self.config, item, value)
        else:
            raise AttributeError(f"{type(self).__name__} {self.name!r} has no argument {item!r}")

    def __deepcopy__(self, memo: dict) -> Component:
        return type(self)(self.name, copy.deepcopy(self.config, memo))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (self.name, self.config) == (other.name, other.config)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__config_to__()!r})"

    def build(self, context: Any) -> Any:
        """The built object: the entry's builder on this config."""
        return self.entry.build(self.config, context)


class ModelSpec(Component):
    slot = "model"

    def build(self, context: Any) -> Any:
        """The built model; refuses a recipe ``embeddings`` section that the model's builder never used
        (:func:`embreg.recipes.accepts.check_tables_reached`); one too big for the machine's memory is a
        ConfigError naming its settings."""
        before = getattr(context, "tables_built", 0)
        settings = ", ".join(f"{key}={value}" for key, value in to_dict(self.config).items())
        with refuse_allocation_failure(f"model {self.name!r} ({settings})"):
            model = super().build(context)
        recipe = getattr(context, "recipe", None)
        if recipe is not None:
            check_tables_reached(recipe, self.name, getattr(context, "tables_built", 0) - before)
        return model


class EmbeddingsSpec(Component):
    slot = "embedding"
    default_name = "uniform"


class TransformSpec(Component):
    slot = "index_transform"


class ObjectiveSpec(Component):
    slot = "objective"
    default_name = "standard"

    def build(self, context: Any) -> Any:
        """The built objective; warns once when it is a no-op on the built model (:mod:`embreg.recipes.no_ops`)."""
        objective = super().build(context)
        warn_no_op(self, objective, context)
        return objective


class RegularizerSpec(Component):
    slot = "regularizer"

    def build(self, context: Any) -> Any:
        """The built regulariser; warns once when it is a no-op on the built model (:mod:`embreg.recipes.no_ops`)."""
        regularizer = super().build(context)
        warn_no_op(self, regularizer, context)
        return regularizer


@dataclass
class TrainConfig:
    """Optimisation, early stopping and what a run keeps; the task supplies defaults for its family.

    Attributes:
        epochs: maximum epochs.
        batch_size: examples per step (language models: parallel token streams).
        eval_batch_size: examples (streams) per evaluation forward (``null``: the task's choice).
        lr, optimizer, weight_decay: the optimizer (``adam``, ``amsgrad``, ``adamw``, ``sgd``, ``adagrad``,
            ``sparse-adam``); ``lr`` is a finite number in ``(0, 1000]`` (:data:`MAX_LR` says why). Sparse tables
            (``embeddings: {sparse: true}``) need ``sparse-adam`` (lazy Adam, :mod:`embreg.optim.lazy_adam`; no weight
            decay), ``sgd`` or ``adagrad``.
        schedule: the learning-rate schedule, one of :data:`embreg.optim.schedules.SCHEDULES`: ``constant``,
            ``linear`` (linear warm-up over ``warmup`` of the steps, then linear decay to 0;
            lnsr-noise-stability-bert.txt, Sec. 4.3), or torch's own schedulers ``cosine``, ``cosine-restarts``,
            ``step``, ``exponential``, ``one-cycle``, stepped after every optimizer step, or ``inverse-sqrt`` (the
            Transformer's: linear warm-up over ``warmup`` of the steps to ``lr``, then ``lr * sqrt(W / step)``, with
            Adam betas 0.9/0.98; :mod:`embreg.optim.inverse_sqrt`).
        warmup: fraction of the steps spent warming up (``linear``, ``cosine``, ``one-cycle``, ``inverse-sqrt``: another schedule
            refuses a warm-up).
        min_lr, restart_epochs, restart_mult, step_epochs, gamma: the settings of the schedules that read them
            (:data:`embreg.optim.schedules.SCHEDULE_SETTINGS`; ``null``: not set); one set under a schedule that
            does not read it is refused.
        average_checkpoints: after training, also evaluate the average of the weights of the last K epochs
            (``averaged_val_*``, ``averaged_test_*`` in ``metrics.json``; ``averaged.safetensors``), as
            :mod:`embreg.train.snapshots` keeps them (``null``: no averaging).
        snapshot_ensemble: keep the weights at the end of each cosine cycle (``schedule: cosine-restarts``) and
            evaluate the ensemble averaging their predictions (``snapshots_val_*``, ``snapshots_test_*``; Huang et
            al. 2017).
        patience: evaluations without improvement before stopping (``null``: never stop early).
        min_epochs: epochs always trained before early stopping may end the run (``0``: none).
        clip_norm: global gradient-norm clipping (``null``: none).
        seed: training seed (initialisation, batch order, negatives, dropout, index transforms).
        num_negatives: sampled negatives per positive (ranking).
        eval_train: also score the training split each epoch (learning curves).
        keep_checkpoints: what stays in the run directory after it finishes: ``all`` (``best`` and ``last``),
            ``best`` or ``none``.
        threads: torch CPU threads, >= 1 (``null``: torch's default).
        device: where to train: ``auto`` (CUDA when present, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``.
        precision: ``fp32``; ``bf16`` (autocast to bfloat16, CPU or CUDA); ``fp16`` (autocast to float16 with loss
            scaling, CUDA only). Weights, optimizer state and evaluation stay in float32.
        fused_step: train with the model's fused step, one C++ call for forward, loss, backward and update
            (``mf`` with sparse tables and ``sparse-adam`` or ``sgd``: :mod:`embreg.models.mf_fused_step`); the same
            step as autograd's up to float rounding. A model or setting that cannot take it is a clear error.
        index_transforms_on: where the index transforms (SSE) draw in training: ``auto`` (on the CPU batch before
            its copy when training on CUDA, inside the forward pass otherwise), ``host`` or ``device``
            (:mod:`embreg.train.host_draws`). The law of the swaps is the same; only the cost differs.
        progress: show progress bars on stderr, over epochs and over the steps within each epoch.
        log_to: experiment loggers fed with every epoch record and the final metrics (:mod:`embreg.train.loggers`):
            ``tensorboard`` (``<run_dir>/tensorboard/``), ``csv`` (``<run_dir>/metrics.csv``), ``wandb``.
        log_every: ``tensorboard`` and ``csv`` also record the training loss and learning rate of every
            ``log_every``-th step (``<run_dir>/tensorboard/steps/``, ``<run_dir>/steps.csv``).
    """

    epochs: int = 100
    batch_size: int = 1024
    eval_batch_size: int | None = None
    lr: float = 1e-3
    optimizer: Literal["adam", "amsgrad", "adamw", "sgd", "adagrad", "sparse-adam"] = "adam"
    weight_decay: float = 0.0
    schedule: str = "constant"
    warmup: float = 0.0
    min_lr: float | None = None
    restart_epochs: int | None = None
    restart_mult: int | None = None
    step_epochs: int | None = None
    gamma: float | None = None
    average_checkpoints: int | None = None
    snapshot_ensemble: bool = False
    patience: int | None = 5
    min_epochs: int = 0
    clip_norm: float | None = None
    seed: int = 0
    num_negatives: int = 1
    eval_train: bool = False
    keep_checkpoints: Literal["all", "best", "none"] = "all"
    threads: int | None = None
    device: str = "auto"
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    fused_step: bool = False
    index_transforms_on: Literal["auto", "host", "device"] = "auto"
    progress: bool = True
    log_to: list[str] = field(default_factory=list)
    log_every: int = 50

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "num_negatives", "log_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"train.{name}={getattr(self, name)} must be >= 1")
        if self.eval_batch_size is not None and self.eval_batch_size < 1:
            raise ConfigError(f"train.eval_batch_size={self.eval_batch_size} must be >= 1 or null")
        for name in ("lr", "weight_decay", "warmup", "min_lr", "gamma", "clip_norm"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ConfigError(f"train.{name}={value} must be a finite number")
        if not 0 < self.lr <= MAX_LR:
            raise ConfigError(
                f"train.lr={self.lr:g} must be in (0, {MAX_LR:g}] (the largest rate a task starts from is the LSTM "
                "LM's SGD at 30)"
            )
        if self.weight_decay < 0:
            raise ConfigError(f"train.weight_decay={self.weight_decay} must be >= 0")
        if self.optimizer == "sparse-adam" and self.weight_decay > 0:
            raise ConfigError(
                f"train.weight_decay={self.weight_decay}: train.optimizer=sparse-adam takes no weight decay (it would "
                "touch every row of a table each step); set train.weight_decay=0"
            )
        if not 0 <= self.warmup < 1:
            raise ConfigError(f"train.warmup={self.warmup} is outside [0, 1)")
        check_schedule_settings(self.schedule, schedule_settings(self))
        check_ensemble_settings(self)
        if self.schedule == "inverse-sqrt" and self.optimizer != "adam":
            raise ConfigError(
                f"train.schedule=inverse-sqrt runs with train.optimizer=adam (betas 0.9/0.98), got {self.optimizer!r}"
            )
        if self.patience is not None and self.patience < 1:
            raise ConfigError(f"train.patience={self.patience} must be >= 1 or null")
        if not 0 <= self.min_epochs <= self.epochs:
            raise ConfigError(f"train.min_epochs={self.min_epochs} must be in [0, train.epochs={self.epochs}]")
        if self.clip_norm is not None and self.clip_norm <= 0:
            raise ConfigError(f"train.clip_norm={self.clip_norm} must be > 0 or null")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"train.threads={self.threads} must be >= 1 or null (null: torch's default)")
        check_logger_names(self.log_to)
        # the device must exist on this machine and train in the precision (errors say what to set instead)
        check_precision(self.precision, resolve_device(self.device))


@dataclass
class SearchParam:
    """One dimension of a hyper-parameter search (``embreg sweep``).

    Attributes:
        type: ``float``, ``log_float``, ``int`` or ``categorical``.
        low, high: bounds for numeric types.
        choices: values for ``categorical``.
    """

    type: Literal["float", "log_float", "int", "categorical"] = "float"
    low: float | None = None
    high: float | None = None
    choices: list[int | float | str | bool | None] | None = None

    def bounds(self) -> tuple[float, float]:
        """``(low, high)`` of a numeric dimension (checked present when the search was loaded)."""
        if self.low is None or self.high is None:
            raise ConfigError(f"a {self.type} search parameter has no low/high bounds")
        return self.low, self.high

    def __post_init__(self) -> None:
        if self.type == "categorical":
            if not self.choices:
                raise ConfigError("a categorical search parameter needs a non-empty 'choices' list")
        elif self.low is None or self.high is None or self.low >= self.high:
            raise ConfigError(f"a {self.type} search parameter needs low < high, got low={self.low}, high={self.high}")
        elif self.type == "log_float" and self.low <= 0:
            raise ConfigError(f"a log_float search parameter needs low > 0, got {self.low}")


@dataclass
class Recipe:
    """A recipe of any family (see the module docstring for the grammar).

    Attributes:
        name, description: shown by ``embreg list``.
        task: a registered task; it fixes the ``data`` section's schema, the train defaults and the metrics.
        data: the task's data config (a dataclass; given as a mapping in YAML).
        model: a registered model with its arguments.
        embeddings: how the model's embedding tables are built (``uniform`` or ``md``), where it has tables.
        index_transforms: id kind (``user``, ``item``, ``token``, ``label``, ``field`` or ``field:<name>``) -> a
            registered index transform.
        objective: the loss estimator (``standard`` or ``dropout-k``).
        regularizers: registered regularisers with their arguments, applied in order.
        train: optimisation (:class:`TrainConfig`); keys it omits take the task's defaults.
        search: dotted key -> search dimension for ``embreg sweep``.
        monitor: validation metric that picks the best epoch (``null``: the task's default).
        tuned: how the values in this recipe were chosen.
    """

    name: str = "recipe"
    description: str = ""
    task: str = "rating"
    data: Any = None
    model: ModelSpec | None = None
    embeddings: EmbeddingsSpec = field(default_factory=lambda: EmbeddingsSpec("uniform"))
    index_transforms: dict[str, TransformSpec] = field(default_factory=dict)
    objective: ObjectiveSpec = field(default_factory=lambda: ObjectiveSpec("standard"))
    regularizers: list[RegularizerSpec] = field(default_factory=list)
    train: Any = None
    search: dict[str, SearchParam] = field(default_factory=dict)
    monitor_metric: str | None = None
    tuned: str = ""

    def __post_init__(self) -> None:
        task = self.task_entry
        data_config = task.extra["data_config"]
        if self.data is None:
            self.data = data_config()
        elif isinstance(self.data, Mapping):
            self.data = from_dict(data_config, self.data, path="data")
        elif not isinstance(self.data, data_config):
            raise ConfigError(f"data must be a mapping for task {self.task!r}, got {type(self.data).__name__}")
        if self.model is None:
            self.model = ModelSpec(task.extra["default_model"])
        if self.train is None or isinstance(self.train, Mapping):
            self.train = from_dict(TrainConfig, {**task.extra["train_defaults"], **(self.train or {})}, path="train")
        elif not isinstance(self.train, TrainConfig):
            raise ConfigError(f"train must be a mapping, got {type(self.train).__name__}")
        check_id_kinds(self.index_transforms, ID_KINDS)
        if self.monitor_metric is not None and not self.monitor_metric.startswith("val_"):
            raise ConfigError(f"monitor_metric={self.monitor_metric!r} must name a validation metric (val_...)")
        check_model_accepts(self)
        if self.train.snapshot_ensemble:
            from embreg.models.ensemble import combine_for_task

            combine_for_task(self.task)  # the snapshots' predictions must be averageable for this task
        task.extra["adapter"].check(self)

    @property
    def task_entry(self) -> Entry:
        try:
            return REGISTRY.get("task", self.task)
        except ConfigError as exc:
            raise ConfigError(f"task: {exc}") from None

    @property
    def adapter(self) -> Any:
        """The task adapter (:class:`embreg.tasks.TaskAdapter`)."""
        return self.task_entry.extra["adapter"]

    @property
    def monitor(self) -> tuple[str, str]:
        """The validation metric that selects the best epoch, and its direction."""
        if self.monitor_metric is not None:
            lower = ("rmse", "mae", "loss", "logloss", "ppl")
            return self.monitor_metric, "min" if self.monitor_metric.endswith(lower) else "max"
        return self.adapter.monitor(self)

"""Typed configuration of fine-tuning recipes (``task: classification`` or ``task: regression``).

A fine-tuning recipe names a labelled text task, a pretrained encoder, one regulariser with its arguments, and the
optimisation (lnsr-noise-stability-bert.txt, Sec. 4.3: AdamW, linear warm-up over 10% of the steps, batch 32,
3 epochs, head initialised N(0, 0.02^2)). Unknown keys are errors with a suggestion, as everywhere in embreg; the
regulariser's ``args`` are checked against its constructor when the recipe is loaded.

Example:
    >>> from embreg.config import from_dict
    >>> cfg = from_dict(FinetuneRecipeConfig, {"regularizer": {"name": "lnsr", "args": {"sigma": 0.05}}})
    >>> cfg.task, cfg.monitor
    ('classification', ('val_mcc', 'max'))
"""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass, field
from typing import Any, Literal

from embreg.errors import ConfigError

__all__ = ["FinetuneDataConfig", "EncoderConfig", "RegularizerConfig", "FinetuneTrainConfig",
           "FinetuneRecipeConfig", "REGULARIZERS", "regularizer_class"]

REGULARIZERS = ("none", "lnsr", "noise", "l2sp", "mixout", "smart", "r3f")
"""Names a recipe may give ``regularizer.name``: plain fine-tuning, LNSR, FT+Noise, L2-SP, Mixout, SMART, R3F."""


def regularizer_class(name: str) -> type | None:
    """The regulariser class behind a recipe name (``None`` for ``"none"``)."""
    from embreg.regularizers import L2SP, LNSR, R3F, SMART, LayerNoise, Mixout

    classes = {"none": None, "lnsr": LNSR, "noise": LayerNoise, "l2sp": L2SP, "mixout": Mixout, "smart": SMART,
               "r3f": R3F}
    if name not in classes:
        close = difflib.get_close_matches(name, list(classes), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown regularizer {name!r}{hint} Choose one of {list(classes)}")
    return classes[name]


@dataclass
class FinetuneDataConfig:
    """The labelled text task.

    Attributes:
        dataset: ``reviews`` (women's clothing reviews) or ``polarity`` (200 sentences).
        task: for ``reviews``: ``binary`` (recommended), ``rating`` (5 classes) or ``regression`` (stars).
        train_size: training examples drawn from the pool (``null``: all); reviews only.
        valid_size, test_size: fixed evaluation sets (reviews: 1000/2000 by default; polarity: 40/40).
        split_seed: seed of the evaluation sets; subset_seed: seed of the training subset.
        max_length: tokens per text (truncated), including [CLS] and [SEP].
    """

    dataset: Literal["reviews", "polarity"] = "reviews"
    task: Literal["binary", "rating", "regression"] = "binary"
    train_size: int | None = 1000
    valid_size: int | None = None
    test_size: int | None = None
    split_seed: int = 0
    subset_seed: int = 0
    max_length: int = 64

    def __post_init__(self) -> None:
        if self.train_size is not None and self.train_size < 1:
            raise ConfigError(f"data.train_size={self.train_size} must be >= 1 or null")
        if self.max_length < 2:
            raise ConfigError(f"data.max_length={self.max_length} must be >= 2")
        if self.dataset == "polarity" and self.task != "binary":
            raise ConfigError(f"data.task={self.task!r}: the polarity dataset has only the 'binary' task")


@dataclass
class EncoderConfig:
    """The pretrained encoder and its head.

    Attributes:
        pretrained: a registry name (``all-minilm-l6-v2``) or a local Hugging Face checkpoint directory.
        pooling: ``mean`` or ``cls`` (see :class:`embreg.models.EncoderClassifier`).
        dropout: dropout before the head (``null``: the encoder's hidden dropout).
        init_std: standard deviation of the head's initialisation.
    """

    pretrained: str = "all-minilm-l6-v2"
    pooling: Literal["mean", "cls"] = "mean"
    dropout: float | None = None
    init_std: float = 0.02

    def __post_init__(self) -> None:
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ConfigError(f"model.dropout={self.dropout} is outside [0, 1)")
        if self.init_std <= 0:
            raise ConfigError(f"model.init_std={self.init_std} must be > 0")


@dataclass
class RegularizerConfig:
    """One regulariser: a name from :data:`REGULARIZERS` and keyword arguments of its class.

    Example ``regularizer: {name: lnsr, args: {sigma: 0.1, start_layer: 1, weights: 1.0}}``.
    """

    name: str = "none"
    args: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        cls = regularizer_class(self.name)
        if cls is None:
            if self.args:
                raise ConfigError(f"regularizer 'none' takes no args, got {sorted(self.args)}")
            return
        valid = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        for key in self.args:
            if key not in valid:
                close = difflib.get_close_matches(key, valid, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"unknown argument regularizer.args.{key} for {self.name!r}{hint} Valid: {valid}")
        self.build()  # the constructor checks the values (ranges, types)

    def build(self) -> Any:
        """A fresh regulariser object (``None`` for plain fine-tuning)."""
        cls = regularizer_class(self.name)
        return None if cls is None else cls(**self.args)


@dataclass
class FinetuneTrainConfig:
    """Optimisation: AdamW with linear warm-up and decay, evaluation each epoch, best epoch by validation.

    Attributes:
        epochs: training epochs (paper: 3).
        batch_size: examples per step (paper: 32).
        lr: peak learning rate; warmup: fraction of steps spent warming up (paper: 0.1).
        weight_decay: AdamW's decoupled weight decay.
        clip_norm: gradient-norm clipping (``null``: none).
        seed: training seed (head initialisation, batch order, dropout, noise).
        threads: torch CPU threads (``null``: torch's default).
        eval_batch_size: examples per evaluation forward pass.
        patience: early stopping on the validation metric (``null``: run all epochs).
        keep_checkpoints: what stays after a seed finishes: ``none``, ``best`` (``best.pt``, ~90 MB for MiniLM, e.g.
            for the noise-attenuation analysis) or ``all`` (also ``last.pt`` with the optimizer, ~270 MB).
        progress: show a progress bar.
    """

    epochs: int = 3
    batch_size: int = 32
    lr: float = 5e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    clip_norm: float | None = 1.0
    seed: int = 0
    threads: int | None = None
    eval_batch_size: int = 64
    patience: int | None = None
    keep_checkpoints: Literal["none", "best", "all"] = "none"
    progress: bool = False

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.eval_batch_size < 1:
            raise ConfigError(f"train.epochs={self.epochs}, batch_size={self.batch_size} and eval_batch_size="
                              f"{self.eval_batch_size} must all be >= 1")
        if self.lr <= 0:
            raise ConfigError(f"train.lr={self.lr} must be > 0")
        if not 0 <= self.warmup < 1:
            raise ConfigError(f"train.warmup={self.warmup} is outside [0, 1)")


@dataclass
class FinetuneRecipeConfig:
    """A fine-tuning recipe: ``task`` tells the command line to use this schema.

    Attributes:
        name, description: shown by ``embreg list``.
        task: ``classification`` or ``regression`` (must match the data: ``reviews`` ``regression`` task).
        monitor: validation metric that picks the best epoch (``null``: ``val_mcc`` for binary, ``val_accuracy``
            for more classes, ``val_corr`` for regression).
        tuned: provenance of the hyper-parameters (how they were chosen).
    """

    name: str = "finetune"
    description: str = ""
    task: Literal["classification", "regression"] = "classification"
    data: FinetuneDataConfig = field(default_factory=FinetuneDataConfig)
    model: EncoderConfig = field(default_factory=EncoderConfig)
    regularizer: RegularizerConfig = field(default_factory=RegularizerConfig)
    train: FinetuneTrainConfig = field(default_factory=FinetuneTrainConfig)
    monitor_metric: str | None = None
    tuned: str = ""

    def __post_init__(self) -> None:
        regression = self.data.dataset == "reviews" and self.data.task == "regression"
        if regression != (self.task == "regression"):
            raise ConfigError(f"task={self.task!r} does not match data.task={self.data.task!r} "
                              "(use task: regression exactly for the reviews 'regression' task)")
        if self.monitor_metric is not None and not self.monitor_metric.startswith("val_"):
            raise ConfigError(f"monitor_metric={self.monitor_metric!r} must name a validation metric (val_...)")

    @property
    def monitor(self) -> tuple[str, str]:
        """The validation metric that selects the best epoch and its direction."""
        if self.monitor_metric is not None:
            return self.monitor_metric, "min" if self.monitor_metric.endswith("rmse") else "max"
        if self.task == "regression":
            return "val_corr", "max"
        if self.data.dataset == "reviews" and self.data.task == "rating":
            return "val_accuracy", "max"
        return "val_mcc", "max"

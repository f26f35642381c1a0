"""Tasks ``classification`` and ``regression``: fine-tuning a pretrained encoder on labelled texts.

Data: the women's clothing reviews (``reviews``: ``binary`` recommended flag, 5-class ``rating`` or ``regression``
on the stars), the 200 polarity sentences (``polarity``), or a user's own CSV/TSV/parquet file with a text and a
label column (``data.path``, ``data.text_col``, ``data.label_col``). The texts are tokenised once per run; the
metrics follow lnsr-noise-stability-bert.txt (MCC for binary tasks, accuracy for more classes, Pearson
correlation for regression). A finished run also records training-split metrics and the generalisation gaps
``gap_<m> = train_<m> - test_<m>``.

Example:
    >>> from embreg.recipes import load_recipe
    >>> load_recipe("ft-reviews-lnsr").monitor
    ('val_mcc', 'max')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from embreg.batching.batches import TensorBatches
from embreg.data.labelled_text import SPLITS, MultiTargetTask, SplitSizeError, TextTask
from embreg.errors import ConfigError, DataError
from embreg.tasks import TaskAdapter, register_task
from embreg.tasks.data_files import (
    check_fit_to_file,
    checked_file,
    file_record,
    note_fitted,
    resolve_data_file,
)
from embreg.tasks.multitask.evaluation import SCORE, MultiTargetEvaluator, target_metric_names
from embreg.tasks.multitask.task import check_multitask, check_multitask_techniques
from embreg.tasks.text.evaluation import TextEvaluator

__all__ = ["LabelledTextConfig", "PreparedText", "TextClassificationTask", "TextRegressionTask", "load_text_task"]


@dataclass
class LabelledTextConfig:
    """The labelled text task.

    Attributes:
        dataset: ``reviews`` (women's clothing reviews), ``polarity`` (200 sentences) or ``file`` (``path``).
        task: for ``reviews``: ``binary`` (recommended), ``rating`` (5 classes), ``regression`` (stars) or
            ``multi`` (several class targets, one head each; :mod:`embreg.tasks.multitask.task`). For a file it
            says what its labels are, and is checked against them: ``binary`` (two classes), ``multiclass`` (three
            or more) or ``regression`` (numbers, with ``task: regression``).
        targets: with ``task: multi``: the targets, in head order (``null``: ``[recommended, rating]``).
        loss_weights: with ``task: multi``: one loss weight per target (``null``: 1 each).
        path: your own CSV/TSV/parquet file (sets ``dataset: file``; resolved to an absolute path when the recipe is
            loaded); text_col, label_col: its columns; sep: separator of text files (``null``: from the extension).
        sha256: the checksum ``path`` must have (``null``: filled in with the file's when the recipe is loaded;
            :mod:`embreg.tasks.data_files`).
        train_size: training examples drawn from the pool (``null``: all). A file too small for it is an error
            naming the ``--set data.train_size=N`` that fits (unless ``fit_to_file`` lists it).
        valid_size, test_size: fixed evaluation sets (reviews: 1000/2000; polarity: 40/40; files: 1000/1000, or
            10% of the rows each for a file of fewer than 2001 rows when left ``null``; sizes given are exact unless
            ``fit_to_file`` lists them).
        split_seed: seed of the evaluation sets; subset_seed: seed of the training subset.
        max_length: tokens per text (truncated), including [CLS] and [SEP].
        fit_to_file: the sizes of :data:`FILE_SIZES` that give way to a user's file too small for them (filled
            in when the recipe is loaded with the sizes the user did not set;
            :mod:`embreg.tasks.data_files`): evaluation sets that leave no training row become 10% of the
            rows each, a ``train_size`` beyond the rows left becomes all of them.
    """

    FILE_SIZES: ClassVar[tuple[str, ...]] = ("train_size", "valid_size", "test_size")

    dataset: Literal["reviews", "polarity", "file"] = "reviews"
    task: Literal["binary", "rating", "multiclass", "regression", "multi"] = "binary"
    targets: list[str] | None = None
    loss_weights: list[float] | None = None
    path: str | None = None
    sha256: str | None = None
    text_col: str = "text"
    label_col: str = "label"
    sep: str | None = None
    train_size: int | None = 1000
    valid_size: int | None = None
    test_size: int | None = None
    split_seed: int = 0
    subset_seed: int = 0
    max_length: int = 64
    fit_to_file: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.dataset == "file" and self.path is None:
            raise ConfigError("data.dataset='file' needs data.path (a CSV/TSV/parquet file with text and labels)")
        resolve_data_file(self)
        if self.train_size is not None and self.train_size < 1:
            raise ConfigError(f"data.train_size={self.train_size} must be >= 1 or null")
        if self.max_length < 2:
            raise ConfigError(f"data.max_length={self.max_length} must be >= 2")
        if self.dataset == "polarity" and self.task != "binary":
            raise ConfigError(f"data.task={self.task!r}: the polarity dataset has only the 'binary' task")
        if self.dataset == "reviews" and self.task == "multiclass":
            raise ConfigError(
                "data.task='multiclass' is for a file's labels; the reviews' 5 classes are data.task=rating"
            )
        if self.dataset == "file" and self.task == "rating":
            raise ConfigError(
                "data.task='rating' names the reviews' 5 star classes; a file's labels are data.task=binary (two "
                "classes), multiclass (more) or regression"
            )
        check_multitask(self)
        check_fit_to_file(self)


@dataclass
class PreparedText:
    """A task and its tokenised splits: ``tensors[split]`` holds ``input_ids``, ``attention_mask``, ... and
    ``labels`` (int64 class ids, or float32 targets)."""

    task: TextTask | MultiTargetTask
    tensors: dict[str, dict[str, torch.Tensor]]
    vocab_size: int = 0
    source: dict[str, Any] = field(default_factory=dict)
    special_ids: tuple[int, ...] = ()
    encoder: dict[str, str] = field(default_factory=dict)


SERVING_RECORD = "serving.json"


def serving_record(prepared: PreparedText) -> dict[str, Any]:
    """What serving a text model needs besides its weights and ``config.yaml``: the task's name and kind, its
    classes (``num_labels`` and ``label_names``; a multi-task run: ``targets`` and each one's class names), and the
    tokenizer's size and special ids (the fingerprint the tokenizer must still have)."""
    task = prepared.task
    record: dict[str, Any] = {"task_name": task.name, "kind": task.kind}
    if isinstance(task, MultiTargetTask):
        record["targets"] = [[name, classes] for name, classes in task.targets]
        record["label_names"] = [list(task.class_names(k)) for k in range(len(task.targets))]
    else:
        record["num_labels"] = task.num_labels
        record["label_names"] = list(task.label_names)
    return record | {"vocab_size": int(prepared.vocab_size), "special_ids": [int(i) for i in prepared.special_ids]}


def serving_data(recipe: Any, record: dict[str, Any]) -> PreparedText:
    """A :class:`PreparedText` without texts (every split empty) holding what :func:`serving_record` recorded, and
    the tokenizer's size and special ids, checked against the record.

    Raises:
        DataError: the tokenizer of ``model.pretrained`` is not the one the run was trained with.
    """
    from embreg.models.pretrained import load_tokenizer

    tokenizer = load_tokenizer(recipe.model.pretrained, progress=False)
    specials = tuple(int(i) for i in tokenizer.all_special_ids)
    if len(tokenizer) != record["vocab_size"] or list(specials) != record["special_ids"]:
        raise DataError(
            f"the tokenizer of model.pretrained={recipe.model.pretrained!r} ({len(tokenizer)} ids, special ids "
            f"{list(specials)}) is not the one this run was trained with ({record['vocab_size']} ids, special ids "
            f"{record['special_ids']}); point model.pretrained at the encoder the run was trained from"
        )
    texts: dict[str, list[str]] = {split: [] for split in SPLITS}
    task: TextTask | MultiTargetTask
    if "targets" in record:
        targets = tuple((str(name), int(classes)) for name, classes in record["targets"])
        columns = {split: np.zeros((0, len(targets)), np.int64) for split in SPLITS}
        names = tuple(tuple(map(str, n)) for n in record["label_names"])
        task = MultiTargetTask(record["task_name"], targets, texts, columns, label_names=names)
    else:
        labels = {split: np.zeros(0, np.int64) for split in SPLITS}
        task = TextTask(
            record["task_name"], record["kind"], record["num_labels"], texts, labels, tuple(record["label_names"])
        )
    return PreparedText(task, {}, vocab_size=len(tokenizer), special_ids=specials)


def load_text_task(recipe: Any) -> TextTask | MultiTargetTask:
    """The :class:`TextTask` (or, for ``data.task: multi``, :class:`MultiTargetTask`) named by ``recipe.data``."""
    d = recipe.data
    if d.task == "multi":
        from embreg.data.datasets.reviews import load_review_targets

        return load_review_targets(
            d.targets,
            train_size=d.train_size,
            valid_size=d.valid_size or 1000,
            test_size=d.test_size or 2000,
            split_seed=d.split_seed,
            subset_seed=d.subset_seed,
        )
    if d.dataset == "polarity":
        from embreg.data.datasets.polarity import load_polarity

        try:
            return load_polarity(
                valid_size=d.valid_size or 40,
                test_size=d.test_size or 40,
                split_seed=d.split_seed,
                train_size=d.train_size,
                subset_seed=d.subset_seed,
            )
        except SplitSizeError as exc:
            raise ConfigError(
                f"{exc}; --set data.train_size={exc.fits['train_size']} or data.train_size=null"
            ) from None
    if d.dataset == "file":
        from embreg.data.files.text_file import load_text_file

        try:
            return load_text_file(
                d.path,
                text_col=d.text_col,
                label_col=d.label_col,
                kind=recipe.task,
                sep=d.sep,
                train_size=d.train_size,
                valid_size=d.valid_size,
                test_size=d.test_size,
                split_seed=d.split_seed,
                subset_seed=d.subset_seed,
                fit=d.fit_to_file,
            )
        except SplitSizeError as exc:
            sets = " ".join(f"--set data.{key}={value}" for key, value in exc.fits.items())
            alternative = " (or data.train_size=null: every row left)" if "train_size" in exc.fits else ""
            raise ConfigError(f"{exc}; {sets} fits this file{alternative}") from None
    from embreg.data.datasets.reviews import load_reviews

    return load_reviews(
        d.task,
        train_size=d.train_size,
        valid_size=d.valid_size or 1000,
        test_size=d.test_size or 2000,
        split_seed=d.split_seed,
        subset_seed=d.subset_seed,
    )


def check_file_classes(data: LabelledTextConfig, task: TextTask) -> None:
    """Refuses a file whose number of classes is not the one ``data.task`` states (``binary``: two;
    ``multiclass``: three or more), so that ``config.yaml`` says what the run trained.

    Raises:
        ConfigError: naming the file, the labels found and the ``data.task`` that fits them.

    Example:
        >>> task = TextTask("t", "classification", 3, {s: [] for s in SPLITS}, {s: [] for s in SPLITS}, ("a", "b", "c"))
        >>> check_file_classes(LabelledTextConfig(dataset="file", path="/d/l.csv", sha256="0" * 64), task)
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: data.task='binary' needs two classes, but /d/l.csv has 3 labels: a, b, c; set data.task=multiclass
    """
    names = task.label_names or tuple(str(i) for i in range(task.num_labels))
    shown = ", ".join(names[:10]) + (f", ... ({len(names) - 10} more)" if len(names) > 10 else "")
    if data.task == "binary" and task.num_labels != 2:
        raise ConfigError(
            f"data.task='binary' needs two classes, but {data.path} has {task.num_labels} labels: {shown}; set "
            "data.task=multiclass"
        )
    if data.task == "multiclass" and task.num_labels < 3:
        raise ConfigError(
            f"data.task='multiclass' is for three or more classes, but {data.path} has {task.num_labels} labels: "
            f"{shown}; set data.task=binary"
        )


class _TextTask(TaskAdapter):
    data_config = LabelledTextConfig
    default_model = "encoder-classifier"
    id_kinds = ("token",)
    smoke_overrides = (
        "data.train_size=32",
        "data.valid_size=16",
        "data.test_size=16",
        "data.max_length=16",
        "train.batch_size=8",
        "train.eval_batch_size=16",
        "train.epochs=1",
        "train.progress=false",
    )
    # lnsr-noise-stability-bert.txt, Sec. 4.3: AdamW, linear warm-up over 10% of the steps, batch 32, 3 epochs
    train_defaults = {
        "epochs": 3,
        "batch_size": 32,
        "eval_batch_size": 64,
        "lr": 5e-5,
        "optimizer": "adamw",
        "schedule": "linear",
        "warmup": 0.1,
        "weight_decay": 0.01,
        "clip_norm": 1.0,
        "patience": None,
        "keep_checkpoints": "best",  # the fine-tuned model stays servable (embreg predict, export)
    }

    def prepare(self, recipe) -> PreparedText:
        from embreg.models.encoder_classifier import encode_texts
        from embreg.models.pretrained import encoder_source, load_tokenizer

        described = checked_file(recipe.data) if recipe.data.path is not None else None
        task = load_text_task(recipe)
        rows = sum(task.sizes.values())
        source = file_record(described, None, rows) if described else {"dataset": recipe.data.dataset, "rows": rows}
        if task.kind != self.name:
            raise ConfigError(f"task={self.name!r} does not match the data's {task.kind!r} labels")
        if described is not None and isinstance(task, TextTask) and task.kind == "classification":
            check_file_classes(recipe.data, task)
        if described is not None:
            sizes = task.record.get("fitted", {})
            fitted = {key: (pair[0], pair[1]) for key, pair in sizes.items()} if isinstance(sizes, dict) else {}
            rule = "the 80/10/10 rule holds 10% of its rows out for validation and for test"
            note_fitted(source, described["path"], fitted, rule)
        tokenizer = load_tokenizer(recipe.model.pretrained, progress=recipe.train.progress)
        tensors = {}
        for split in SPLITS:
            encoded = encode_texts(tokenizer, task.texts[split], recipe.data.max_length)
            dtype = torch.float32 if task.kind == "regression" else torch.long
            encoded["labels"] = torch.as_tensor(task.labels[split], dtype=dtype)
            tensors[split] = encoded
        specials = tuple(int(i) for i in tokenizer.all_special_ids)
        encoder = encoder_source(recipe.model.pretrained)
        return PreparedText(
            task, tensors, vocab_size=len(tokenizer), source=source, special_ids=specials, encoder=encoder
        )

    def num_ids(self, prepared: PreparedText, kind: str) -> int:
        """The tokenizer's vocabulary size (every id the encoder's embedding table has)."""
        return int(prepared.vocab_size)

    def excluded_ids(self, prepared: PreparedText, kind: str) -> tuple[int, ...]:
        """The tokenizer's special ids: an index transform never swaps a word for [PAD], [MASK], [CLS], ..."""
        return prepared.special_ids

    def batches(self, recipe, prepared: PreparedText) -> TensorBatches:
        return TensorBatches(prepared.tensors["train"], recipe.train.batch_size, seed=recipe.train.seed)

    def evaluator(self, recipe, prepared: PreparedText) -> TextEvaluator | MultiTargetEvaluator:
        if isinstance(prepared.task, MultiTargetTask):
            weights = recipe.data.loss_weights or [1.0] * len(prepared.task.targets)
            return MultiTargetEvaluator(
                prepared.tensors, prepared.task.targets, weights, batch_size=recipe.train.eval_batch_size or 64
            )
        return TextEvaluator(prepared.tensors, prepared.task.num_labels, batch_size=recipe.train.eval_batch_size or 64)

    def records(self, recipe, prepared: PreparedText) -> dict:
        """``split.json`` (how the data was split) and ``serving.json`` (:func:`serving_record`)."""
        return {
            "split.json": prepared.task.record | {"task_name": prepared.task.name, "data": prepared.source},
            SERVING_RECORD: serving_record(prepared),
        }

    def serving_data(self, recipe, read_record) -> PreparedText | None:
        """The classes and the tokenizer's size from ``serving.json`` (:func:`serving_data`): predictions on new
        texts need neither the training texts nor their tokens."""
        record = read_record(SERVING_RECORD)
        return None if record is None else serving_data(recipe, record)

    def data_used(self, recipe, prepared: PreparedText) -> dict[str, Any]:
        """The data, and where the encoder came from (the report names both)."""
        return prepared.source | prepared.encoder

    def extra_metric_names(self, recipe) -> tuple[str, ...]:
        """What :meth:`finish` adds: the training split's metrics (``train_``) and their gaps to test (``gap_``)."""
        evaluated = self.evaluated_metrics(recipe)
        return tuple(f"{prefix}_{name}" for prefix in ("train", "gap") for name in evaluated)

    def finish(self, recipe, prepared, trainer, evaluator, metrics: dict) -> dict:
        metrics = dict(metrics)
        for name, value in evaluator(trainer.model, "train").items():
            metrics[f"train_{name}"] = value
            if f"test_{name}" in metrics:
                metrics[f"gap_{name}"] = value - metrics[f"test_{name}"]
        return metrics


class TextClassificationTask(_TextTask):
    """Class labels: cross-entropy; MCC (binary) or accuracy (more classes), F1 and the rest on every split."""

    name = "classification"
    headline = (
        "test_mcc",
        "test_accuracy",
        "test_f1",
        "test_macro_f1",
        "test_multitask_score",
        "test_mcc_recommended",
        "test_accuracy_rating",
    )

    def evaluated_metrics(self, recipe) -> tuple[str, ...]:
        """Accuracy and MCC; F1 of class 1 for two classes, macro-F1 for more (a file's labels may be either);
        with ``data.task: multi`` each target's, suffixed by its name, and ``multitask_score``."""
        d = recipe.data
        if d.task == "multi":
            from embreg.data.datasets.reviews import REVIEW_TARGETS

            return target_metric_names([(t, REVIEW_TARGETS[t]) for t in d.targets])
        if d.dataset == "file":
            return ("accuracy", "mcc", "f1", "macro_f1")
        binary = d.dataset == "polarity" or d.task == "binary"
        return ("accuracy", "mcc", "f1" if binary else "macro_f1")

    def check_data(self, recipe) -> None:
        if recipe.data.task == "regression":
            raise ConfigError("data.task='regression' needs task: regression")
        if recipe.data.task == "multi":
            check_multitask_techniques(recipe)

    def monitor(self, recipe) -> tuple[str, str]:
        if recipe.data.task == "multi":
            return f"val_{SCORE}", "max"
        if recipe.data.dataset == "reviews" and recipe.data.task == "rating":
            return "val_accuracy", "max"
        return "val_mcc", "max"


class TextRegressionTask(_TextTask):
    """Real-valued targets: squared loss; Pearson correlation and RMSE."""

    name = "regression"
    headline = ("test_corr", "test_pearson", "test_spearman", "test_rmse")

    def evaluated_metrics(self, recipe) -> tuple[str, ...]:
        return ("pearson", "spearman", "corr", "rmse")

    def check_data(self, recipe) -> None:
        if recipe.data.dataset not in ("reviews", "file") or recipe.data.task != "regression":
            raise ConfigError(
                f"task: regression needs data.task='regression' on reviews or a file, got "
                f"data.dataset={recipe.data.dataset!r}, data.task={recipe.data.task!r}"
            )

    def monitor(self, recipe) -> tuple[str, str]:
        return "val_corr", "max"


register_task(
    TextClassificationTask(),
    "fine-tune a pretrained encoder on labelled texts: MCC / accuracy",
    "lnsr-noise-stability-bert.txt, Sec. 4",
)
register_task(
    TextRegressionTask(),
    "fine-tune a pretrained encoder on texts with real targets: Pearson r",
    "lnsr-noise-stability-bert.txt, Sec. 4",
)

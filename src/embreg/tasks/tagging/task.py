"""Task ``tagging``: sequence labelling with a CRF tagger; token accuracy and span-level precision, recall, F1.

Data: a user's CoNLL-format files (``data.path``: the training file; ``data.valid_path`` and ``data.test_path``, or
a seeded sentence split of ``data.path`` by ``data.split``; the tag column ``data.tag_column``,
:mod:`embreg.data.files.conll`), or, by default, ``reviews-silver``: the clothing reviews' real text with tags made by
a fixed rule (:mod:`embreg.data.datasets.review_tags`; no human-labelled sequence data is reachable from the package
registries here). Every split's tags must be in the training tag set and valid under the model's ``tag_scheme``
(:func:`embreg.tasks.tagging.corpus.check_tags`), each offence named by file and line. Id kind for index
transforms: ``token``. The validation metric is span F1 (``val_f1``) under ``bio``/``iobes``, token accuracy
under ``none``.

Example:
    >>> from embreg.recipes import load_recipe
    >>> load_recipe("tagging-bilstm-crf").monitor
    ('val_f1', 'max')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from embreg.batching.batches import TensorBatches
from embreg.data.files.conll import TaggedSentence, read_conll
from embreg.data.files.user_files import resolved_path
from embreg.data.splits import random_split
from embreg.errors import ConfigError
from embreg.tasks import TaskAdapter, check_split, register_task
from embreg.tasks.data_files import checked_file, file_record, require_split_rows, resolve_data_file
from embreg.tasks.tagging.corpus import SPLITS, TaggedCorpus, bio_to_iobes, check_tags
from embreg.tasks.tagging.evaluation import SPAN_METRICS, TAGGING_METRICS, TaggingEvaluator

__all__ = ["TaggingDataConfig", "PreparedTagging", "TaggingTask", "load_tagged_splits"]

_DEFAULT_SPLIT = [0.8, 0.1, 0.1]


@dataclass
class TaggingDataConfig:
    """The tagged sentences and their splits.

    Attributes:
        dataset: ``reviews-silver`` (the substitute, module docstring) or ``file`` (set by ``path``).
        path: your training CoNLL file (resolved to an absolute path; its checksum goes to ``sha256``,
            :mod:`embreg.tasks.data_files`).
        sha256: the checksum ``path`` must have (``null``: filled in when the recipe is loaded).
        valid_path, test_path: your validation and test CoNLL files (both or neither; without them ``path`` is
            split by ``split``).
        tag_column: the column of the tag in your files (``-1``: the last; files only).
        split: sentence shares of train/valid/test when the data is one pool (not with ``valid_path``/``test_path``).
        split_seed: seed of that split.
        max_sentences: the first sentences of the pool (and of each of your files) only (quick runs).
        min_count: training tokens seen fewer times become ``<unk>``.
    """

    dataset: Literal["reviews-silver", "file"] = "reviews-silver"
    path: str | None = None
    sha256: str | None = None
    valid_path: str | None = None
    test_path: str | None = None
    tag_column: int = -1
    split: list[float] = field(default_factory=lambda: list(_DEFAULT_SPLIT))
    split_seed: int = 0
    max_sentences: int | None = None
    min_count: int = 1

    def __post_init__(self) -> None:
        resolve_data_file(self)
        check_split(self.split)
        given = [name for name in ("valid_path", "test_path") if getattr(self, name) is not None]
        if given and self.path is None:
            raise ConfigError(f"data.{given[0]} needs data.path (the training file) as well")
        if len(given) == 1:
            missing = "test_path" if given == ["valid_path"] else "valid_path"
            raise ConfigError(
                f"data.{given[0]} is set but data.{missing} is not: give both, or neither to split "
                "data.path by data.split"
            )
        if given and self.split != _DEFAULT_SPLIT:
            raise ConfigError(f"data.split={self.split} is unused: data.valid_path and data.test_path give the splits")
        for name in given:
            setattr(self, name, str(resolved_path(getattr(self, name))))
        if self.path is None and self.tag_column != -1:
            raise ConfigError(f"data.tag_column={self.tag_column} is unused: it selects a column of data.path files")
        if self.tag_column == 0:
            raise ConfigError("data.tag_column=0 is the token's column; the tag is another (-1: the last)")
        if self.max_sentences is not None and self.max_sentences < 10:
            raise ConfigError(f"data.max_sentences={self.max_sentences} must be >= 10 or null")
        if self.min_count < 1:
            raise ConfigError(f"data.min_count={self.min_count} must be >= 1")


@dataclass
class PreparedTagging:
    """The corpus and its padded tensors per split (``tokens``, ``tags``, ``mask``)."""

    corpus: TaggedCorpus
    tensors: dict[str, dict[str, Any]]


def _tag_scheme(recipe: Any) -> str:
    return str(getattr(recipe.model.config, "tag_scheme", "none"))


def load_tagged_splits(recipe: Any) -> tuple[dict[str, list[TaggedSentence]], dict[str, Any]]:
    """The train/valid/test sentences named by ``recipe.data`` and the record of where they came from."""
    d = recipe.data
    limit = d.max_sentences
    if d.path is None:
        from embreg.data.datasets.review_tags import SILVER_DATASET, load_review_sentences

        pool = load_review_sentences(limit)
        if _tag_scheme(recipe) == "iobes":
            pool = [TaggedSentence(s.tokens, bio_to_iobes(s.tags), s.source, s.lines) for s in pool]
        source: dict[str, Any] = {"dataset": SILVER_DATASET, "rows": len(pool), "labels": "silver (rule-made)"}
    else:
        described = checked_file(d)
        pool = read_conll(d.path, tag_column=d.tag_column)[:limit]
        source = file_record(described, {"rows_read": len(pool)}, len(pool))
        if d.valid_path is not None:
            splits = {"train": pool}
            for split, path in (("valid", d.valid_path), ("test", d.test_path)):
                splits[split] = read_conll(path, tag_column=d.tag_column)[:limit]
                source[f"{split}_file"] = {"path": path, "sentences": len(splits[split])}
            return splits, source
    require_split_rows(len(pool), d.split, source)
    index = random_split(len(pool), d.split, seed=d.split_seed)
    return {split: [pool[i] for i in np.asarray(index[split])] for split in SPLITS}, source


class TaggingTask(TaskAdapter):
    """Sequence labelling: CRF negative log-likelihood; token accuracy and span precision/recall/F1."""

    name = "tagging"
    data_config = TaggingDataConfig
    default_model = "bilstm-crf"
    id_kinds = ("token",)
    smoke_overrides = (
        "data.max_sentences=200",
        "train.batch_size=16",
        "train.eval_batch_size=64",
        "train.epochs=1",
        "train.progress=false",
    )
    # Lample et al. 2016 (nlp-best-practices.txt [62]): dropout 0.5, gradient clipping 5.0
    train_defaults = {
        "epochs": 10,
        "batch_size": 32,
        "eval_batch_size": 128,
        "lr": 0.001,
        "optimizer": "adam",
        "clip_norm": 5.0,
        "patience": None,
    }
    headline = ("test_f1", "test_accuracy", "test_precision", "test_recall")

    def _spans(self, recipe: Any) -> bool:
        return _tag_scheme(recipe) != "none"

    def monitor(self, recipe: Any) -> tuple[str, str]:
        return ("val_f1", "max") if self._spans(recipe) else ("val_accuracy", "max")

    def evaluated_metrics(self, recipe: Any) -> tuple[str, ...]:
        return TAGGING_METRICS + (SPAN_METRICS if self._spans(recipe) else ())

    def prepare(self, recipe: Any) -> PreparedTagging:
        splits, source = load_tagged_splits(recipe)
        check_tags(splits, _tag_scheme(recipe))
        corpus = TaggedCorpus(splits, min_count=recipe.data.min_count, source=source)
        return PreparedTagging(corpus, {split: corpus.tensors(split) for split in SPLITS})

    def num_ids(self, prepared: PreparedTagging, kind: str) -> int:
        return len(prepared.corpus.vocab)

    def frequencies(self, prepared: PreparedTagging, kind: str) -> np.ndarray:
        return prepared.corpus.token_counts().numpy()

    def batches(self, recipe: Any, prepared: PreparedTagging) -> TensorBatches:
        return TensorBatches(prepared.tensors["train"], recipe.train.batch_size, seed=recipe.train.seed)

    def evaluator(self, recipe: Any, prepared: PreparedTagging) -> TaggingEvaluator:
        return TaggingEvaluator(
            prepared.tensors,
            prepared.corpus.tags,
            spans=self._spans(recipe),
            batch_size=recipe.train.eval_batch_size or 128,
        )

    def records(self, recipe: Any, prepared: PreparedTagging) -> dict[str, Any]:
        return {"split.json": prepared.corpus.summary() | {"split_seed": recipe.data.split_seed}}

    def data_used(self, recipe: Any, prepared: PreparedTagging) -> dict[str, Any]:
        return prepared.corpus.source


register_task(
    TaggingTask(),
    "sequence labelling (CoNLL files): CRF log-likelihood; token accuracy, span F1",
    "nlp-best-practices.txt, Sequence labelling",
)

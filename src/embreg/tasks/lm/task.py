"""Task ``lm``: word-level language modelling with BPTT windows; perplexity on the validation and test streams.

Data: the English Wikipedia extract from the registry (``enwiki-gensim``, split by article) or a user's three
plain-text files (``data.paths: [train, valid, test]``). ``train.batch_size`` is the number of parallel token
streams. Id kinds for index transforms: ``token`` (input words) and ``label`` (target words).

Example:
    >>> from embreg.recipes import load_recipe
    >>> load_recipe("lm-dropout").monitor
    ('val_ppl', 'min')
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embreg.data import TextCorpus, load_enwiki, load_text_files
from embreg.errors import ConfigError
from embreg.tasks import TaskAdapter, check_split, register_task
from embreg.tasks.lm.batches import BPTTBatches
from embreg.tasks.lm.evaluation import PerplexityEvaluator

__all__ = ["TextDataConfig", "LanguageModelTask"]


@dataclass
class TextDataConfig:
    """The corpus, its article-level split, vocabulary and BPTT windows.

    Attributes:
        dataset: registry name (``enwiki-gensim``); ignored when ``paths`` is set.
        paths: your own ``[train, valid, test]`` plain-text files instead of a registry dataset.
        split: token shares of train/valid/test (articles are never divided).
        split_seed: seed of the article split.
        min_count: training words seen fewer times become ``<unk>``.
        max_vocab: cap on the vocabulary size (``null``: none).
        max_articles: use only the first articles of the dump (quick slices).
        max_train_tokens, max_eval_tokens: truncate the training / each evaluation stream (CPU-sized runs).
        bptt: window length; variable_bptt: AWD-LSTM's random window lengths.
    """

    dataset: str = "enwiki-gensim"
    paths: list[str] | None = None
    split: list[float] = field(default_factory=lambda: [0.8, 0.1, 0.1])
    split_seed: int = 0
    min_count: int = 3
    max_vocab: int | None = None
    max_articles: int | None = None
    max_train_tokens: int | None = None
    max_eval_tokens: int | None = None
    bptt: int = 35
    variable_bptt: bool = False

    def __post_init__(self) -> None:
        if self.paths is not None and len(self.paths) != 3:
            raise ConfigError(f"data.paths={self.paths} must list three files: train, valid, test")
        check_split(self.split)
        for name in ("min_count", "bptt"):
            if getattr(self, name) < 1:
                raise ConfigError(f"data.{name}={getattr(self, name)} must be >= 1")
        for name in ("max_train_tokens", "max_eval_tokens"):
            value = getattr(self, name)
            if value is not None and value < 100:
                raise ConfigError(f"data.{name}={value} must be >= 100 or null")


class LanguageModelTask(TaskAdapter):
    """Next-word prediction: cross-entropy; perplexity (``ppl``) on the validation and test streams."""

    name = "lm"
    data_config = TextDataConfig
    default_model = "lstm-lm"
    id_kinds = ("token", "label")
    smoke_overrides = (
        "data.max_articles=30",
        "data.max_vocab=500",
        "data.max_train_tokens=3000",
        "data.max_eval_tokens=500",
        "train.batch_size=4",
        "train.eval_batch_size=4",
        "train.epochs=1",
        "train.progress=false",
    )
    # dropout-explicit-implicit-regularization.txt, App. D.1: SGD, lr 30, clipping 0.35, weight decay 1.2e-6
    train_defaults = {
        "epochs": 20,
        "batch_size": 20,
        "eval_batch_size": 10,
        "lr": 30.0,
        "optimizer": "sgd",
        "weight_decay": 1.2e-6,
        "clip_norm": 0.35,
        "patience": None,
    }

    headline = ("test_ppl",)

    def monitor(self, recipe) -> tuple[str, str]:
        return "val_ppl", "min"

    def evaluated_metrics(self, recipe) -> tuple[str, ...]:
        return ("loss", "ppl")

    def prepare(self, recipe) -> TextCorpus:
        d = recipe.data
        if d.paths is not None:
            corpus = load_text_files(*d.paths, min_count=d.min_count, max_vocab=d.max_vocab)
        elif d.dataset == "enwiki-gensim":
            corpus = load_enwiki(
                fractions=tuple(d.split),
                seed=d.split_seed,
                min_count=d.min_count,
                max_vocab=d.max_vocab,
                max_articles=d.max_articles,
            )
        else:
            raise ConfigError(f"data.dataset={d.dataset!r} holds no text; use 'enwiki-gensim' or set data.paths")
        limits = {"train": d.max_train_tokens, "valid": d.max_eval_tokens, "test": d.max_eval_tokens}
        for split, limit in limits.items():
            if limit is not None:
                corpus.splits[split] = corpus.splits[split][:limit]
        return corpus

    def num_ids(self, prepared: TextCorpus, kind: str) -> int:
        return len(prepared.vocab)

    def frequencies(self, prepared: TextCorpus, kind: str) -> np.ndarray:
        return np.bincount(prepared.splits["train"], minlength=len(prepared.vocab))

    def batches(self, recipe, prepared: TextCorpus) -> BPTTBatches:
        d = recipe.data
        return BPTTBatches(
            prepared.splits["train"],
            recipe.train.batch_size,
            d.bptt,
            variable_length=d.variable_bptt,
            seed=recipe.train.seed,
        )

    def evaluator(self, recipe, prepared: TextCorpus) -> PerplexityEvaluator:
        splits = {name: prepared.splits[name] for name in ("valid", "test")}
        return PerplexityEvaluator(splits, batch_size=recipe.train.eval_batch_size or 10, bptt=recipe.data.bptt)

    def records(self, recipe, prepared: TextCorpus) -> dict:
        record = prepared.summary()
        record.update(split_seed=recipe.data.split_seed, fractions=recipe.data.split, articles=dict(prepared.articles))
        return {"corpus.json": record}


register_task(
    LanguageModelTask(),
    "word-level language modelling: cross-entropy; perplexity",
    "dropout-explicit-implicit-regularization.txt, Sec. 5.1",
)

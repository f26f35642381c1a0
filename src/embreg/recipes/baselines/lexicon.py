"""Baseline ``lexicon``: word-by-word translation with an IBM Model 1 lexicon learnt on the recipe's training split.

The translation task's pairs (:func:`embreg.tasks.translation.task.translation_splits`: the same file,
``data.min_words`` filter, split by distinct source and ``data.max_*_pairs`` subsets as the trained translator)
are white-space tokenised as they are (case and punctuation kept); IBM Model 1 (Brown et al. 1993;
:mod:`embreg.models.ibm_model1`) is learnt on the training pairs with ``iterations`` EM iterations and a NULL
source word; each source word of a validation or test sentence becomes its most probable target word and unknown
words are copied. The output is scored with sacreBLEU's corpus BLEU and chrF against the references
(:func:`embreg.tasks.translation.evaluation.corpus_scores`), on the test split and on the first ``data.valid_sentences``
validation pairs (the sentences ``val_bleu`` decodes).

On dictionary pairs, which are short and largely word for word, such a lexicon is the line a neural translator must
clear before its BLEU means anything; on any new translation data it is the first sanity check.

Metrics: ``test_bleu``, ``test_chrf``, ``val_bleu``, ``val_chrf``, ``test_unknown_words`` (share of the test
source words copied because training never saw them), ``fit_seconds`` and ``wall_seconds``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from embreg.errors import ConfigError
from embreg.recipes.baselines import BaselineResult
from embreg.registry import register

__all__ = ["LexiconConfig", "LEXICON_METRICS", "lexicon_baseline"]

LEXICON_METRICS = (
    "test_bleu",
    "test_chrf",
    "val_bleu",
    "val_chrf",
    "test_unknown_words",
    "fit_seconds",
    "wall_seconds",
)
"""The metrics a ``lexicon`` run reports."""


@dataclass
class LexiconConfig:
    """``baseline.iterations``: EM iterations from uniform ``t``; ``baseline.null_word``: a NULL source word."""

    iterations: int = 5
    null_word: bool = True

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ConfigError(f"baseline.iterations={self.iterations} must be >= 1")


@register(
    "baseline",
    "lexicon",
    config=LexiconConfig,
    summary="IBM Model 1 word lexicon (EM), word-by-word translation with unknown words copied; sacreBLEU",
    reference="Brown et al. 1993 (IBM Model 1); the sanity line of sse-stochastic-shared-embeddings.txt, Table 5",
    tasks=("translation",),
    metrics=LEXICON_METRICS,
)
def lexicon_baseline(config: LexiconConfig, recipe: Any) -> BaselineResult:
    """Learns the lexicon on ``recipe``'s training split and scores it on its validation and test splits."""
    from embreg.models.ibm_model1 import fit_ibm_model1
    from embreg.tasks.translation.evaluation import corpus_scores
    from embreg.tasks.translation.task import translation_splits

    d = recipe.data
    splits = translation_splits(d, progress=recipe.train.progress)
    began = time.perf_counter()
    model = fit_ibm_model1(splits.split["train"], config.iterations, null=config.null_word)
    metrics: dict[str, float] = {"fit_seconds": time.perf_counter() - began}
    outputs: dict[str, list[dict[str, str]]] = {}
    for split, prefix in (("valid", "val"), ("test", "test")):
        pairs = splits.split[split][: d.valid_sentences] if split == "valid" else splits.split[split]
        hypotheses = [model.translate(source) for source, _ in pairs]
        for name, value in corpus_scores(hypotheses, [target for _, target in pairs]).items():
            metrics[f"{prefix}_{name}"] = value
        outputs[split] = [{"source": s, "reference": t, "output": h} for (s, t), h in zip(pairs, hypotheses)]
    words = [w for source, _ in splits.split["test"] for w in source.split()]
    metrics["test_unknown_words"] = sum(w not in model.best for w in words) / max(len(words), 1)
    record = {
        **splits.record(d),
        "iterations": config.iterations,
        "null_word": config.null_word,
        "source_words": len(model.best),
        "target_words": len(model.links.target_words),
        "table_cells": len(model.probability),
    }
    return BaselineResult(metrics, record, outputs)

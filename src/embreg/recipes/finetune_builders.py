"""Builders for fine-tuning recipes: the text task, its token tensors, the encoder classifier, batches, evaluator.

The text is tokenised once per recipe (:func:`prepare_text`) and shared by every seed of a multi-seed run; each
seed builds a fresh model from the pretrained weights (:func:`build_classifier`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from embreg.data.labelled_text import SPLITS, TextTask
from embreg.models.encoder_classifier import EncoderClassifier, encode_texts
from embreg.models.pretrained import load_pretrained
from embreg.recipes.finetune_schema import FinetuneRecipeConfig
from embreg.train.batches import TensorBatches
from embreg.train.text_evaluation import TextEvaluator

__all__ = ["PreparedText", "load_text_task", "prepare_text", "build_classifier", "build_text_batches",
           "build_text_evaluator", "build_regularizers"]


@dataclass
class PreparedText:
    """A task and its tokenised splits: ``tensors[split]`` holds ``input_ids``, ``attention_mask``, ... and
    ``labels`` (int64 class ids, or float32 targets)."""

    task: TextTask
    tensors: dict[str, dict[str, torch.Tensor]]


def load_text_task(cfg: FinetuneRecipeConfig) -> TextTask:
    """The :class:`TextTask` named by ``cfg.data``."""
    d = cfg.data
    if d.dataset == "polarity":
        from embreg.data.polarity import load_polarity

        return load_polarity(valid_size=d.valid_size or 40, test_size=d.test_size or 40, split_seed=d.split_seed)
    from embreg.data.reviews import load_reviews

    return load_reviews(d.task, train_size=d.train_size, valid_size=d.valid_size or 1000,
                        test_size=d.test_size or 2000, split_seed=d.split_seed, subset_seed=d.subset_seed)


def prepare_text(cfg: FinetuneRecipeConfig, tokenizer: Any | None = None) -> PreparedText:
    """Loads the task and tokenises every split to at most ``cfg.data.max_length`` tokens."""
    task = load_text_task(cfg)
    if tokenizer is None:
        _, tokenizer = load_pretrained(cfg.model.pretrained)
    tensors = {}
    for split in SPLITS:
        encoded = encode_texts(tokenizer, task.texts[split], cfg.data.max_length)
        dtype = torch.float32 if task.kind == "regression" else torch.long
        encoded["labels"] = torch.as_tensor(task.labels[split], dtype=dtype)
        tensors[split] = encoded
    return PreparedText(task, tensors)


def build_classifier(cfg: FinetuneRecipeConfig, task: TextTask) -> EncoderClassifier:
    """A fresh :class:`EncoderClassifier` on the pretrained encoder (seed torch first: the head is random)."""
    encoder, _ = load_pretrained(cfg.model.pretrained, progress=cfg.train.progress)
    m = cfg.model
    return EncoderClassifier(encoder, task.num_labels, pooling=m.pooling, dropout=m.dropout, init_std=m.init_std)


def build_regularizers(cfg: FinetuneRecipeConfig) -> list[Any]:
    """The recipe's regulariser as a list (empty for plain fine-tuning)."""
    regularizer = cfg.regularizer.build()
    return [] if regularizer is None else [regularizer]


def build_text_batches(cfg: FinetuneRecipeConfig, prepared: PreparedText) -> TensorBatches:
    """Shuffled training batches, reshuffled each epoch from ``(train.seed, epoch)``."""
    return TensorBatches(prepared.tensors["train"], cfg.train.batch_size, seed=cfg.train.seed)


def build_text_evaluator(cfg: FinetuneRecipeConfig, prepared: PreparedText) -> TextEvaluator:
    """Scores ``train``, ``valid`` and ``test``."""
    return TextEvaluator(prepared.tensors, prepared.task.num_labels, batch_size=cfg.train.eval_batch_size)

"""Scoring a tagger: Viterbi-decoded tags against the gold tags, token accuracy and span-level P/R/F1.

Example:
    >>> class FirstTag(nn.Module):
    ...     def decode(self, batch):
    ...         return torch.zeros_like(batch["tokens"])
    >>> data = {"valid": {"tokens": torch.ones(2, 3, dtype=torch.long), "tags": torch.tensor([[0, 1, 2], [0, 0, 0]]),
    ...                   "mask": torch.tensor([[True, True, True], [True, True, False]])}}
    >>> TaggingEvaluator(data, ["O", "B-X", "I-X"], spans=True)(FirstTag(), "valid")
    {'accuracy': 0.6, 'precision': 0.0, 'recall': 0.0, 'f1': 0.0}
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.tasks.tagging.span_f1 import span_scores, token_accuracy
from embreg.train.device import model_device, move_batch

__all__ = ["TaggingEvaluator", "TAGGING_METRICS", "SPAN_METRICS"]

TAGGING_METRICS = ("accuracy",)
SPAN_METRICS = ("precision", "recall", "f1")


class TaggingEvaluator:
    """Decodes every sentence of a split with ``model.decode(batch) -> (B, T)`` tag ids, in evaluation mode.

    Args:
        splits: ``{split: {"tokens", "tags", "mask"}}`` ``(N, T)`` tensors.
        tags: the tag names in id order.
        spans: also report span precision, recall and F1 (tags with BIO/IOBES prefixes).
        batch_size: sentences per forward pass.
    """

    def __init__(
        self, splits: dict[str, dict[str, torch.Tensor]], tags: list[str], *, spans: bool, batch_size: int = 64
    ) -> None:
        if batch_size < 1:
            raise EmbregError(f"batch_size={batch_size} must be >= 1")
        self.splits = splits
        self.tags = list(tags)
        self.spans = spans
        self.batch_size = batch_size

    @property
    def split_names(self) -> list[str]:
        return list(self.splits)

    def metric_names(self) -> tuple[str, ...]:
        return TAGGING_METRICS + (SPAN_METRICS if self.spans else ())

    @torch.no_grad()
    def predict(self, model: nn.Module, split: str) -> torch.Tensor:
        """Decoded tag ids ``(N, T)`` of ``split`` (``-1`` at padding)."""
        if split not in self.splits:
            raise KeyError(f"unknown split {split!r}; this evaluator has {self.split_names}")
        data = self.splits[split]
        n, t = data["tokens"].shape
        out = torch.full((n, t), -1, dtype=torch.long)
        was_training = model.training
        model.eval()
        device = model_device(model)
        try:
            for start in range(0, n, self.batch_size):
                batch = move_batch({k: v[start : start + self.batch_size] for k, v in data.items()}, device)
                decoded = cast(Any, model).decode(batch).cpu()
                out[start : start + decoded.shape[0], : decoded.shape[1]] = decoded
        finally:
            model.train(was_training)
        return out

    def __call__(self, model: nn.Module, split: str) -> dict[str, float]:
        predicted = self.predict(model, split)
        data = self.splits[split]
        lengths = data["mask"].sum(dim=1).tolist()
        gold_ids, pred_ids = data["tags"].tolist(), predicted.tolist()
        gold = [[self.tags[i] for i in row[:n]] for row, n in zip(gold_ids, lengths, strict=True)]
        pred = [[self.tags[i] for i in row[:n]] for row, n in zip(pred_ids, lengths, strict=True)]
        metrics = {"accuracy": token_accuracy(gold, pred)}
        if self.spans:
            metrics.update(span_scores(gold, pred))
        return metrics

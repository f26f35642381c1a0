"""Masked-LM evaluation: cross-entropy, perplexity and top-1 accuracy over the predicted positions of fixed,
pre-masked texts.

The held-out texts are masked once, with a fixed seed, when the data is prepared, so every epoch (and every run of
the same data settings) is scored on the same selected positions. ``ppl = exp(loss)``, ``loss`` the mean
cross-entropy over every selected position of the split (not a mean of batch means); ``accuracy`` the share of the
selected positions whose highest-scoring id is the original one (what a fill-mask pipeline's first answer gets right;
a head that answers "the" everywhere scores the frequency of "the" among the selected word pieces).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from embreg.data.mlm_masking import IGNORE_INDEX
from embreg.errors import EmbregError
from embreg.train.device import model_device, move_batch

__all__ = ["MaskedLMEvaluator"]


class MaskedLMEvaluator:
    """``evaluator(model, split) -> {"loss", "ppl", "accuracy"}`` for a masked-LM model (``forward(batch).predictions``:
    ``(M, V)`` logits of the batch's selected positions, row-major).

    Args:
        splits: ``{split: {"input_ids": (N, T), "attention_mask": (N, T), "labels": (N, T)}}``, already masked.
        batch_size: texts per forward pass.

    Example:
        >>> class Uniform(nn.Module):
        ...     def forward(self, batch):
        ...         from embreg.models.output import ModelOutput
        ...         return ModelOutput(torch.zeros(int((batch["labels"] != -100).sum()), 4))
        >>> data = {"valid": {"input_ids": torch.ones(2, 3, dtype=torch.long),
        ...                   "attention_mask": torch.ones(2, 3, dtype=torch.long),
        ...                   "labels": torch.tensor([[1, -100, 2], [-100, 3, -100]])}}
        >>> scores = MaskedLMEvaluator(data)(Uniform(), "valid")
        >>> round(scores["ppl"], 4), scores["accuracy"]  # uniform over 4 ids; ties go to id 0, never a target here
        (4.0, 0.0)
    """

    def __init__(self, splits: dict[str, dict[str, torch.Tensor]], *, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise EmbregError(f"batch_size={batch_size} must be >= 1")
        for split, tensors in splits.items():
            if int((tensors["labels"] != IGNORE_INDEX).sum()) == 0:
                raise EmbregError(f"split {split!r} has no masked position to score (more or longer texts needed)")
        self.splits = splits
        self.batch_size = batch_size

    def __call__(self, model: nn.Module, split: str) -> dict[str, float]:
        if split not in self.splits:
            raise EmbregError(f"no split {split!r}; have {sorted(self.splits)}")
        tensors = self.splits[split]
        device = model_device(model)
        was_training = model.training
        model.eval()
        total, count, correct = 0.0, 0, 0
        try:
            with torch.no_grad():
                n = tensors["input_ids"].shape[0]
                for start in range(0, n, self.batch_size):
                    batch = move_batch({k: v[start : start + self.batch_size] for k, v in tensors.items()}, device)
                    labels = batch["labels"]
                    targets = labels[labels != IGNORE_INDEX]
                    if targets.numel() == 0:
                        continue
                    logits = model(batch).predictions
                    total += float(F.cross_entropy(logits.float(), targets, reduction="sum"))
                    correct += int((logits.argmax(dim=-1) == targets).sum())
                    count += int(targets.numel())
        finally:
            model.train(was_training)
        loss = total / count
        return {"loss": loss, "ppl": math.exp(loss) if loss < 700 else math.inf, "accuracy": correct / count}

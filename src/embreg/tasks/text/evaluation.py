"""Metrics and an evaluator for labelled text tasks: accuracy, F1, MCC; Pearson and Spearman for regression.

lnsr-noise-stability-bert.txt, Table 4 names the metrics of its tasks: accuracy (RTE), the mean of accuracy and
F1 (MRPC), Matthews correlation (CoLA) and the mean of Pearson and Spearman correlation (STS-B).
:func:`classification_metrics` and :func:`regression_metrics` compute them from predictions;
:class:`TextEvaluator` runs a model over tokenised splits in evaluation mode (``evaluator(model, split)``, the
protocol of :class:`embreg.train.trainer.Trainer`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.train.device import model_device, move_batch

__all__ = ["classification_metrics", "regression_metrics", "TextEvaluator"]


def _mcc(confusion: np.ndarray) -> float:
    """Matthews correlation of a ``(C, C)`` confusion matrix (Gorodkin's multi-class form; 0 when undefined)."""
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    n, correct = confusion.sum(), np.trace(confusion)
    denominator = math.sqrt(float(n * n - (p * p).sum())) * math.sqrt(float(n * n - (t * t).sum()))
    return float(correct * n - (t * p).sum()) / denominator if denominator > 0 else 0.0


def classification_metrics(predicted: np.ndarray, labels: np.ndarray, num_labels: int) -> dict[str, float]:
    """Accuracy and Matthews correlation; for two classes also F1 of class 1, for more the macro-F1.

    Args:
        predicted: ``(N,)`` predicted class ids.
        labels: ``(N,)`` true class ids in ``[0, num_labels)``.
        num_labels: number of classes.

    Example:
        >>> m = classification_metrics(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0]), 2)
        >>> m["accuracy"], round(m["f1"], 4), round(m["mcc"], 4)
        (0.75, 0.6667, 0.5774)
    """
    predicted, labels = np.asarray(predicted, dtype=np.int64), np.asarray(labels, dtype=np.int64)
    if predicted.shape != labels.shape or predicted.ndim != 1 or predicted.size == 0:
        raise EmbregError(f"need two equally long, non-empty 1-D arrays, got {predicted.shape} and {labels.shape}")
    confusion = np.zeros((num_labels, num_labels), dtype=np.int64)
    np.add.at(confusion, (labels, predicted), 1)
    tp = np.diag(confusion).astype(np.float64)
    f1 = np.divide(
        2 * tp,
        confusion.sum(axis=0) + confusion.sum(axis=1),
        out=np.zeros(num_labels),
        where=(confusion.sum(axis=0) + confusion.sum(axis=1)) > 0,
    )
    result = {"accuracy": float((predicted == labels).mean()), "mcc": _mcc(confusion)}
    if num_labels == 2:
        result["f1"] = float(f1[1])
    else:
        result["macro_f1"] = float(f1.mean())
    return result


def regression_metrics(predicted: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    """Pearson and Spearman correlation, their mean (``corr``, the STS-B score) and the RMSE.

    A constant prediction has no correlation; it is reported as 0.

    Example:
        >>> m = regression_metrics(np.array([1.0, 2.0, 3.5]), np.array([1.0, 2.0, 3.0]))
        >>> round(m["pearson"], 4), m["spearman"]
        (0.9934, 1.0)
    """
    predicted, targets = np.asarray(predicted, dtype=np.float64), np.asarray(targets, dtype=np.float64)
    if predicted.shape != targets.shape or predicted.ndim != 1 or predicted.size < 2:
        raise EmbregError(f"need two equally long 1-D arrays of >= 2 values, got {predicted.shape} and {targets.shape}")
    if np.ptp(predicted) == 0 or np.ptp(targets) == 0:
        pearson = spearman = 0.0
    else:
        from scipy import stats as scipy_stats  # imported on use: scipy.stats takes ~1 s to import

        pearson = float(scipy_stats.pearsonr(predicted, targets).statistic)
        spearman = float(scipy_stats.spearmanr(predicted, targets).statistic)
    rmse = float(np.sqrt(np.mean((predicted - targets) ** 2)))
    return {"pearson": pearson, "spearman": spearman, "corr": (pearson + spearman) / 2, "rmse": rmse}


class TextEvaluator:
    """Scores a text model on tokenised splits, in evaluation mode, batch by batch in order of length.

    Args:
        splits: ``{split: {"input_ids": (N, T), "attention_mask": (N, T), ..., "labels": (N,)}}``.
        num_labels: classes, or 1 for regression.
        batch_size: examples per forward pass.

    Example:
        >>> class Majority(nn.Module):
        ...     def forward(self, batch):
        ...         from embreg.models.output import ModelOutput
        ...         return ModelOutput(torch.tensor([[0.0, 1.0]]).expand(len(batch["labels"]), 2))
        >>> data = {"valid": {"input_ids": torch.ones(4, 3, dtype=torch.long),
        ...                   "attention_mask": torch.ones(4, 3, dtype=torch.long),
        ...                   "labels": torch.tensor([1, 1, 1, 0])}}
        >>> TextEvaluator(data, num_labels=2)(Majority(), "valid")["accuracy"]
        0.75
    """

    def __init__(self, splits: dict[str, dict[str, torch.Tensor]], num_labels: int, *, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise EmbregError(f"batch_size={batch_size} must be >= 1")
        for split, tensors in splits.items():
            if "labels" not in tensors or "attention_mask" not in tensors:
                raise EmbregError(f"split {split!r} needs 'labels' and 'attention_mask' tensors, has {sorted(tensors)}")
        self.splits = splits
        self.num_labels = num_labels
        self.batch_size = batch_size
        # Sorting by length keeps padding (trimmed per batch by the model) to a minimum.
        self._order = {s: torch.argsort(t["attention_mask"].sum(dim=1), stable=True) for s, t in splits.items()}

    @property
    def split_names(self) -> list[str]:
        return list(self.splits)

    @torch.no_grad()
    def predict(self, model: nn.Module, split: str) -> torch.Tensor:
        """Predictions for every example of ``split`` in the original order: ``(N, C)`` logits or ``(N,)``."""
        if split not in self.splits:
            raise KeyError(f"unknown split {split!r}; this evaluator has {self.split_names}")
        data, order = self.splits[split], self._order[split]
        was_training = model.training
        model.eval()
        device = model_device(model)
        parts = []
        try:
            for start in range(0, order.numel(), self.batch_size):
                index = order[start : start + self.batch_size]
                parts.append(model(move_batch({k: v[index] for k, v in data.items()}, device)).predictions.float())
        finally:
            model.train(was_training)
        predictions = torch.empty((order.numel(), *parts[0].shape[1:]), dtype=parts[0].dtype)
        predictions[order] = torch.cat(parts).cpu()
        return predictions

    def __call__(self, model: nn.Module, split: str) -> dict[str, float]:
        predictions = self.predict(model, split)
        labels = self.splits[split]["labels"].cpu().numpy()
        if self.num_labels == 1:
            return regression_metrics(predictions.numpy(), labels)
        return classification_metrics(predictions.argmax(dim=-1).numpy(), labels, self.num_labels)

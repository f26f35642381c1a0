"""Binary click prediction metrics (log-loss, accuracy, ROC AUC) and the evaluator CTR recipes use.

mixed-dimension-embeddings.txt, Sec. V reports "statistical performance in terms of cross entropy loss" and
accuracy (Appendix I, Fig. 8); AUC is added because it is the usual CTR ranking metric.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import EmbregError
from embreg.train.device import model_device, move_batch

__all__ = ["binary_log_loss", "binary_accuracy", "roc_auc", "CTREvaluator"]


def _check(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if logits.shape != labels.shape or logits.ndim != 1:
        raise EmbregError(
            f"logits and labels must both be 1-d of equal length, got {tuple(logits.shape)} and {tuple(labels.shape)}"
        )
    if logits.numel() == 0:
        raise EmbregError("logits and labels are empty; need at least one example")
    return logits.detach().double(), labels.detach().double()


def binary_log_loss(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean binary cross-entropy of logits (N,) against 0/1 labels (N,), in float64.

    Example:
        >>> round(binary_log_loss(torch.zeros(2), torch.tensor([0.0, 1.0])), 4)
        0.6931
    """
    logits, labels = _check(logits, labels)
    return F.binary_cross_entropy_with_logits(logits, labels).item()


def binary_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of examples where ``logit > 0`` equals ``label == 1``.

    Example:
        >>> binary_accuracy(torch.tensor([2.0, -1.0, 0.5]), torch.tensor([1.0, 1.0, 0.0]))
        0.3333333333333333
    """
    logits, labels = _check(logits, labels)
    return ((logits > 0) == (labels > 0.5)).double().mean().item()


def roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve via the Mann-Whitney rank statistic (ties get average ranks).

    Returns ``nan`` when only one class is present.

    Example:
        >>> roc_auc(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0.0, 0.0, 1.0, 1.0]))
        0.75
    """
    scores, labels = _check(scores, labels)
    positives = labels > 0.5
    n_pos, n_neg = int(positives.sum()), int((~positives).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = torch.argsort(scores)
    sorted_scores = scores[order]
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, scores.numel() + 1, dtype=torch.float64)
    # average the ranks of tied scores
    unique, inverse, counts = torch.unique_consecutive(sorted_scores, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()
    average = ends - (counts.double() - 1) / 2
    ranks[order] = average[inverse]
    rank_sum = ranks[positives].sum().item()
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


class CTREvaluator:
    """Log-loss, accuracy and AUC of a click model's logits on named splits (eval mode).

    Relies only on the model protocol: ``model(batch).predictions`` are logits (B,); the labels are
    ``batch["label"]``.

    Args:
        splits: ``{split: {"label": (N,), ...the model's input tensors, all with N rows}}``.
        batch_size: prediction batch size.

    Example:
        >>> class Const(nn.Module):
        ...     def forward(self, batch):
        ...         from embreg.models import ModelOutput
        ...         return ModelOutput(predictions=torch.zeros(batch["label"].shape[0]))
        >>> ev = CTREvaluator({"valid": {"label": torch.tensor([0.0, 1.0])}})
        >>> {k: round(v, 4) for k, v in ev(Const(), "valid").items()}
        {'logloss': 0.6931, 'accuracy': 0.5, 'auc': 0.5}
    """

    def __init__(self, splits: dict[str, dict[str, torch.Tensor]], *, batch_size: int = 65536) -> None:
        for name, data in splits.items():
            if "label" not in data:
                raise EmbregError(f"split {name!r} has no 'label' tensor; it has {sorted(data)}")
        self.splits = splits
        self.batch_size = batch_size

    @property
    def split_names(self) -> list[str]:
        return list(self.splits)

    @torch.no_grad()
    def logits(self, model: nn.Module, split: str) -> torch.Tensor:
        """Logits (N,) for every example of ``split``."""
        if split not in self.splits:
            raise KeyError(f"unknown split {split!r}; this evaluator has {self.split_names}")
        data = self.splits[split]
        was_training = model.training
        model.eval()
        device = model_device(model)
        n = data["label"].shape[0]
        parts = [
            model(move_batch({k: v[s : s + self.batch_size] for k, v in data.items()}, device)).predictions
            for s in range(0, n, self.batch_size)
        ]
        model.train(was_training)
        return torch.cat(parts).cpu()

    def __call__(self, model: nn.Module, split: str) -> dict[str, float]:
        logits = self.logits(model, split)
        labels = self.splits[split]["label"]
        return {
            "logloss": binary_log_loss(logits, labels),
            "accuracy": binary_accuracy(logits, labels),
            "auc": roc_auc(logits, labels),
        }

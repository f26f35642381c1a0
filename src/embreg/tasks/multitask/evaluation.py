"""Evaluating a multi-task text model: each head's metrics, and one score that picks the best epoch.

For every target ``t`` the evaluator reports the metrics of :func:`embreg.tasks.text.evaluation.
classification_metrics` as ``<metric>_<t>`` (``accuracy_rating``, ``mcc_recommended``, ...). The best epoch is
chosen on ``multitask_score``, the loss-weighted mean of each head's own selection metric,

    multitask_score = sum_k w_k s_k / sum_k w_k,

with ``s_k`` the metric a single-task run of target ``k`` selects on: Matthews correlation for a two-class target
(as ``classification`` on ``binary`` monitors ``val_mcc``), accuracy for more classes (``rating``:
``val_accuracy``). Weights ``(1, 0)`` make it the first target's selection metric exactly, so that run picks the
epoch the single-task run picks.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.tasks.text.evaluation import TextEvaluator, classification_metrics

__all__ = ["MultiTargetEvaluator", "selection_metric", "target_metric_names", "SCORE"]

SCORE = "multitask_score"


def selection_metric(num_labels: int) -> str:
    """The metric a single-task run of a target with ``num_labels`` classes selects its best epoch on."""
    return "mcc" if num_labels == 2 else "accuracy"


def target_metric_names(targets: Sequence[tuple[str, int]]) -> tuple[str, ...]:
    """Every metric name the evaluator returns, unprefixed (``accuracy_rating``, ..., ``multitask_score``).

    Example:
        >>> target_metric_names([("recommended", 2), ("rating", 5)])
        ('accuracy_recommended', 'mcc_recommended', 'f1_recommended', 'accuracy_rating', 'mcc_rating', 'macro_f1_rating', 'multitask_score')
    """
    names = [
        f"{metric}_{name}"
        for name, classes in targets
        for metric in ("accuracy", "mcc", "f1" if classes == 2 else "macro_f1")
    ]
    return (*names, SCORE)


class MultiTargetEvaluator:
    """Scores a multi-task model's concatenated logits ``(N, sum_k C_k)`` per target.

    Args:
        splits: ``{split: {"input_ids", "attention_mask", ..., "labels": (N, K)}}``.
        targets: ``((name, classes), ...)`` in the order of the model's heads and the label columns.
        weights: the loss weights (``>= 0``, not all 0), which weigh :data:`SCORE`.
        batch_size: examples per forward pass.

    Example:
        >>> from embreg.models.output import ModelOutput
        >>> class Fixed(nn.Module):
        ...     def forward(self, batch):
        ...         logits = torch.tensor([[0.0, 1.0, 0.0, 0.0, 1.0]]).expand(len(batch["labels"]), 5)
        ...         return ModelOutput(logits)
        >>> data = {"valid": {"input_ids": torch.ones(2, 3, dtype=torch.long),
        ...                   "attention_mask": torch.ones(2, 3, dtype=torch.long),
        ...                   "labels": torch.tensor([[1, 2], [0, 1]])}}
        >>> m = MultiTargetEvaluator(data, [("a", 2), ("b", 3)], [1.0, 1.0])(Fixed(), "valid")
        >>> m["accuracy_a"], m["accuracy_b"], m["multitask_score"]
        (0.5, 0.5, 0.25)
    """

    def __init__(
        self,
        splits: dict[str, dict[str, torch.Tensor]],
        targets: Sequence[tuple[str, int]],
        weights: Sequence[float],
        *,
        batch_size: int = 64,
    ) -> None:
        if len(weights) != len(targets) or not any(w > 0 for w in weights) or any(w < 0 for w in weights):
            raise EmbregError(f"weights={list(weights)} must be one number >= 0 per target {list(targets)}, not all 0")
        self.targets = tuple(targets)
        self.weights = tuple(float(w) for w in weights)
        self.text = TextEvaluator(splits, sum(c for _, c in self.targets), batch_size=batch_size)

    @property
    def split_names(self) -> list[str]:
        return self.text.split_names

    def predict(self, model: nn.Module, split: str) -> torch.Tensor:
        """Concatenated logits ``(N, sum_k C_k)`` in the split's order."""
        return self.text.predict(model, split)

    def __call__(self, model: nn.Module, split: str) -> dict[str, float]:
        logits = self.predict(model, split)
        labels = self.text.splits[split]["labels"].cpu().numpy()
        parts = torch.split(logits, [c for _, c in self.targets], dim=-1)
        result: dict[str, float] = {}
        score = 0.0
        for k, ((name, classes), part) in enumerate(zip(self.targets, parts, strict=True)):
            metrics = classification_metrics(part.argmax(dim=-1).numpy(), labels[:, k], classes)
            result |= {f"{metric}_{name}": value for metric, value in metrics.items()}
            if self.weights[k] > 0:
                score += self.weights[k] * metrics[selection_metric(classes)]
        result[SCORE] = score / sum(self.weights)
        return result

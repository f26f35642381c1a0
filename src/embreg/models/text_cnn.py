"""A CNN sentence classifier (Kim, 2014) on word-piece embeddings.

nlp-best-practices.txt, "Classification" > "CNN filters" and "Aggregation function": filter sizes near the
optimal one combined, e.g. (3, 4, 5), 50-600 feature maps, 1-max pooling. For each filter size ``h``, ``F`` maps
``c_i = ReLU(w . x_{i:i+h-1} + b)`` slide over the embedded text, each map is max-pooled over time, the pooled
maps of all sizes are concatenated and, after dropout (0.5, Kim 2014), a linear layer gives the logits.

Padding never reaches the output: the embedded padding is zeroed, a text shorter than the widest filter is padded
with zero vectors to its width (as Kim's zero padding), and windows that run past a text's last token are left out
of the max, so an example's output does not depend on the batch it is in. Kim's l2-norm constraint on the output
weights is not applied (the recipes use weight decay instead).

Example:
    >>> torch.manual_seed(0) is not None
    True
    >>> model = TextCNN(nn.Embedding(20, 8), num_labels=2, num_filters=4)
    >>> batch = {"input_ids": torch.tensor([[2, 5, 6, 3, 0], [2, 7, 3, 0, 0]]),
    ...          "attention_mask": torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]]), "labels": torch.tensor([1, 0])}
    >>> out = model(batch)
    >>> out.predictions.shape, model.loss(batch, out).dim()
    (torch.Size([2, 2]), 0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import ConfigError
from embreg.models.text_heads import Target, num_task_labels, task_targets
from embreg.models.token_classifier import (
    TokenClassifier,
    TokenModelConfig,
    _positive,
    token_table,
)
from embreg.registry import register

__all__ = ["TextCNN", "TextCNNConfig", "max_over_windows"]


def max_over_windows(maps: torch.Tensor, lengths: torch.Tensor, width: int) -> torch.Tensor:
    """1-max pooling over the windows that lie inside each text: ``(B, F, W) -> (B, F)``.

    Args:
        maps: feature maps of filter width ``width`` over a padded batch (window ``i`` covers tokens ``i..i+width-1``).
        lengths: ``(B,)`` tokens per text.
        width: the filter width.

    A text shorter than ``width`` keeps its first window (zero-padded).

    Example:
        >>> maps = torch.tensor([[[1.0, 5.0, 9.0]]])
        >>> max_over_windows(maps, torch.tensor([3]), 2).tolist()  # windows 0 and 1 lie inside 3 tokens
        [[5.0]]
    """
    valid = (lengths - width + 1).clamp(min=1)  # (B,)
    positions = torch.arange(maps.shape[-1], device=maps.device)
    outside = positions.unsqueeze(0) >= valid.unsqueeze(1)  # (B, W)
    return maps.masked_fill(outside.unsqueeze(1), float("-inf")).amax(dim=-1)


class TextCNN(TokenClassifier):
    """Embedding -> one convolution per filter size -> ReLU -> 1-max pooling -> concat -> dropout -> head(s).

    Args:
        embedding: the token table ``(V, E)``.
        num_labels: classes (>= 2), or 1 for regression.
        filter_sizes: the filter widths (Kim 2014: 3, 4, 5).
        num_filters: feature maps per width (Kim 2014: 100).
        dropout, token_transform, targets: see :class:`~embreg.models.token_classifier.TokenClassifier`.

    Shapes: ``input_ids`` ``(B, T)`` -> predictions ``(B, C)`` (``(B,)`` for regression);
    ``hidden["features"]`` ``(B, len(filter_sizes) * num_filters)``.
    """

    def __init__(
        self,
        embedding: nn.Embedding,
        num_labels: int,
        *,
        filter_sizes: tuple[int, ...] | list[int] = (3, 4, 5),
        num_filters: int = 100,
        dropout: float = 0.5,
        token_transform: nn.Module | None = None,
        targets: list[Target] | None = None,
    ) -> None:
        sizes = tuple(filter_sizes)
        if not sizes or any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in sizes):
            raise ConfigError(f"filter_sizes={list(sizes)} must be one or more ints >= 1")
        if isinstance(num_filters, bool) or not isinstance(num_filters, int) or num_filters < 1:
            raise ConfigError(f"num_filters={num_filters!r} must be an int >= 1")
        super().__init__(
            embedding,
            len(sizes) * num_filters,
            num_labels,
            dropout=dropout,
            token_transform=token_transform,
            targets=targets,
        )
        self.filter_sizes = sizes
        self.convs = nn.ModuleList(nn.Conv1d(embedding.embedding_dim, num_filters, h) for h in sizes)

    def features(self, embedded: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        widest = max(self.filter_sizes)
        x = embedded.transpose(1, 2)  # (B, E, T)
        if x.shape[-1] < widest:
            x = F.pad(x, (0, widest - x.shape[-1]))
        lengths = mask.long().sum(dim=1)
        pooled = [
            max_over_windows(F.relu(conv(x)), lengths, h) for conv, h in zip(self.convs, self.filter_sizes, strict=True)
        ]
        return torch.cat(pooled, dim=-1), {}


@dataclass
class TextCNNConfig(TokenModelConfig):
    """``model: {name: text-cnn, ...}`` (see :class:`TextCNN` and
    :class:`~embreg.models.token_classifier.TokenModelConfig`).

    Attributes:
        filter_sizes: filter widths (3, 4, 5 as the document recommends).
        num_filters: feature maps per width (Kim 2014: 100; the document: 50-600).
    """

    filter_sizes: list[int] = field(default_factory=lambda: [3, 4, 5])
    num_filters: int = 100

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.filter_sizes or any(
            isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in self.filter_sizes
        ):
            raise ConfigError(f"model.filter_sizes={self.filter_sizes!r} must be one or more ints >= 1")
        _positive("num_filters", self.num_filters)


@register(
    "model",
    "text-cnn",
    config=TextCNNConfig,
    tasks=("classification", "regression"),
    kinds=("token",),
    embeddings=("uniform",),
    provides=(),
    summary="CNN sentence classifier: filter sizes 3, 4, 5, 1-max pooling, dropout (Kim, 2014)",
    reference="nlp-best-practices.txt, Classification > CNN filters, Aggregation function (Kim, 2014)",
)
def build_text_cnn(config: TextCNNConfig, context: Any) -> TextCNN:
    """The CNN on the task's word pieces, its table from MiniLM's token embeddings or random."""
    return TextCNN(
        token_table(config, context, "text-cnn"),
        num_task_labels(context),
        filter_sizes=config.filter_sizes,
        num_filters=config.num_filters,
        dropout=config.dropout,
        token_transform=context.transforms.get("token"),
        targets=task_targets(context),
    )

"""Output heads of the text classifiers: one linear head, or several on shared features (multi-task learning).

nlp-best-practices.txt, "Multi-task learning" (Ruder, 2017: hard parameter sharing): one encoder shared by every
task, one output layer per task, and the loss the weighted sum of the tasks' losses,

    L = sum_k w_k * CE(logits_k, y_k),    w_k >= 0, at least one w_k > 0.

A head of weight 0 takes no part in the loss (its term is left out, not multiplied by 0), so its parameters get no
gradient and the run trains the shared part exactly as the other heads alone would.

Every head is a linear layer initialised N(0, init_std^2) with a zero bias (lnsr-noise-stability-bert.txt,
Appendix A). The first target's head draws its initial weights from torch's global generator exactly as a
single-task model's one head does; the other heads draw theirs from generators of their own (seeded from the
global seed and their position), so adding a head leaves the rest of the run's random stream (dropout masks)
unchanged: a multi-task run whose other heads have weight 0 is, bit for bit, the single-task run of the first
target.

Example:
    >>> heads = MultiTaskHeads(4, [Target("recommended", 2, 1.0), Target("rating", 5, 0.5)])
    >>> logits = heads(torch.randn(3, 4))
    >>> logits.shape, [part.shape[1] for part in heads.split(logits)]
    (torch.Size([3, 7]), [2, 5])
    >>> heads.loss(logits, torch.tensor([[1, 4], [0, 0], [1, 2]])).dim()
    0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import ConfigError

__all__ = ["Target", "MultiTaskHeads", "linear_head", "head_loss", "task_targets", "num_task_labels"]


@dataclass(frozen=True)
class Target:
    """One prediction target of a multi-task model: its name, its number of classes and its loss weight."""

    name: str
    num_labels: int
    weight: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.num_labels, bool) or not isinstance(self.num_labels, int) or self.num_labels < 2:
            raise ConfigError(f"target {self.name!r}: num_labels={self.num_labels!r} must be an int >= 2")
        weight = self.weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"target {self.name!r}: loss weight {weight!r} must be a finite number >= 0")


def linear_head(
    in_dim: int, num_outputs: int, init_std: float = 0.02, *, generator: torch.Generator | None = None
) -> nn.Linear:
    """``nn.Linear(in_dim, num_outputs)`` with weights N(0, init_std^2) and a zero bias.

    Without ``generator`` it is built as :class:`~embreg.models.encoder_classifier.EncoderClassifier` builds its
    head (``nn.Linear``'s own draws from the global generator, then the normal draw); with one, nothing is drawn
    from the global generator.

    Example:
        >>> head = linear_head(3, 2, generator=torch.Generator().manual_seed(0))
        >>> head.weight.shape, head.bias.tolist()
        (torch.Size([2, 3]), [0.0, 0.0])
    """
    if generator is None:
        head = nn.Linear(in_dim, num_outputs)
    else:
        head = nn.Linear(in_dim, num_outputs, device="meta").to_empty(device="cpu")
    nn.init.normal_(head.weight, std=init_std, generator=generator)
    nn.init.zeros_(head.bias)
    return head


class MultiTaskHeads(nn.Module):
    """One linear head per target on shared features: ``(B, D) -> (B, sum_k C_k)`` concatenated logits.

    Args:
        in_dim: width ``D`` of the shared features.
        targets: the targets in order (at least two names, distinct, at least one weight > 0).
        init_std: standard deviation of each head's initial weights.

    Raises:
        ConfigError: fewer than two targets, a name twice, or every weight 0.
    """

    def __init__(self, in_dim: int, targets: Sequence[Target], init_std: float = 0.02) -> None:
        super().__init__()
        targets = tuple(targets)
        names = [t.name for t in targets]
        if len(targets) < 2 or len(set(names)) != len(names):
            raise ConfigError(f"multi-task heads need two or more distinct targets, got {names}")
        if not any(t.weight > 0 for t in targets):
            raise ConfigError(f"every loss weight is 0 ({names}): at least one target must count in the loss")
        self.targets = targets
        seed = torch.initial_seed()
        self.heads = nn.ModuleList(
            linear_head(
                in_dim,
                t.num_labels,
                init_std,
                generator=None if k == 0 else torch.Generator().manual_seed((seed + 7919 * k) % 2**63),
            )
            for k, t in enumerate(targets)
        )

    @property
    def num_outputs(self) -> int:
        return sum(t.num_labels for t in self.targets)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        parts = []
        for target, module in zip(self.targets, self.heads, strict=True):
            head = cast(nn.Linear, module)
            if target.weight == 0 and torch.is_grad_enabled():
                # outside the loss: its logits (for its metrics) must not put zero gradients into the backward
                # pass, which would change the gradient norm's rounding and train its parameters by weight decay
                parts.append(F.linear(features.detach(), head.weight.detach(), head.bias.detach()))
            else:
                parts.append(head(features))
        return torch.cat(parts, dim=-1)

    def split(self, logits: torch.Tensor) -> list[torch.Tensor]:
        """``(B, sum_k C_k) -> [(B, C_1), ...]``, one block of logits per target."""
        return list(torch.split(logits, [t.num_labels for t in self.targets], dim=-1))

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """``sum_k w_k CE(logits_k, labels[:, k])`` over the targets of weight > 0.

        Args:
            logits: ``(B, sum_k C_k)``.
            labels: ``(B, K)`` class ids, one column per target.
        """
        if labels.dim() != 2 or labels.shape[1] != len(self.targets):
            raise ConfigError(
                f"multi-task labels must be (B, {len(self.targets)}) (one column per target), got {tuple(labels.shape)}"
            )
        total: torch.Tensor | None = None
        for k, (target, part) in enumerate(zip(self.targets, self.split(logits), strict=True)):
            if target.weight == 0:
                continue
            term = F.cross_entropy(part, labels[:, k].long())
            term = term if target.weight == 1 else target.weight * term
            total = term if total is None else total + term
        assert total is not None  # __init__ refuses all-zero weights
        return total


def head_loss(head: nn.Module, predictions: torch.Tensor, labels: torch.Tensor, *, regression: bool) -> torch.Tensor:
    """The loss of a text model's head: :meth:`MultiTaskHeads.loss`, else cross-entropy, or MSE for regression."""
    if isinstance(head, MultiTaskHeads):
        return head.loss(predictions, labels)
    if regression:
        return F.mse_loss(predictions, labels.to(predictions.dtype))
    return F.cross_entropy(predictions, labels.long())


def task_targets(context: Any) -> list[Target] | None:
    """The targets of a multi-target task (``data.task: multi``) with their loss weights (``data.loss_weights``,
    ``null``: 1 each), else ``None`` (one head of ``context.prepared.task.num_labels`` outputs)."""
    heads = getattr(context.prepared.task, "targets", None)
    if heads is None:
        return None
    weights = context.recipe.data.loss_weights or [1.0] * len(heads)
    return [Target(name, num_labels, float(w)) for (name, num_labels), w in zip(heads, weights, strict=True)]


def num_task_labels(context: Any) -> int:
    """Outputs of a single-target task's head (0 for a multi-target task, whose heads come from
    :func:`task_targets`)."""
    return 0 if getattr(context.prepared.task, "targets", None) is not None else context.prepared.task.num_labels

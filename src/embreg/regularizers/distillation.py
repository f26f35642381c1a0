"""Knowledge distillation of an ensemble into one model, as a training objective (``objective: {name: distill}``).

nlp-best-practices.txt ("Ensembling") names distilling an ensemble into a single model as the way to keep an
ensemble's accuracy at one model's cost. Hinton et al. (2015, "Distilling the Knowledge in a Neural Network",
Sec. 2) train the student on the teachers' soft targets at temperature ``T`` beside the true labels:

    loss = alpha * T^2 * KL(p_T || q_T) + (1 - alpha) * CE(y, q)

with ``q_T = softmax(z_student / T)``, ``p_T`` the teachers' soft targets: the mean over teachers of
``softmax(z_teacher / T)`` (an ensemble's averaged probabilities), and ``CE`` the student's own loss (its
``model.loss``: cross-entropy for classifiers). The ``T^2`` keeps the soft term's gradients on the scale of the hard
term's as ``T`` changes (Hinton et al., Sec. 2). The KL divergence is summed over classes and averaged over the
batch. ``alpha = 0`` is plain training; ``alpha = 1`` learns from the teachers alone.

Cost: one forward pass of every teacher per step (no backward; teachers stay frozen in eval mode).

Tasks: ``classification`` (class logits ``(B, C)``); other tasks are refused when the recipe is loaded. The
teachers are run directories of finished runs (a multi-seed directory stands for its seeds) on the very same data
and tokenisation as the student's recipe (:func:`embreg.serving.ensemble.check_same_data`); loading them is a
serving matter, so the objective is registered, with its teacher loading, in :mod:`embreg.serving.teachers`.

Example:
    >>> import torch
    >>> student = torch.tensor([[1.0, 0.0]])
    >>> teacher = teacher_probabilities([torch.tensor([[0.0, 1.0]])], temperature=1.0)
    >>> hard = torch.tensor(0.5)
    >>> round(float(distillation_loss(student, teacher, hard, temperature=1.0, alpha=0.0)), 4)
    0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import ConfigError
from embreg.models.output import ModelOutput

if TYPE_CHECKING:
    from embreg.models.protocols import LossModel

__all__ = ["Distillation", "DistillationConfig", "distillation_loss", "teacher_probabilities", "DISTILL_TASKS"]

DISTILL_TASKS = ("classification",)
"""The tasks whose models distil: their predictions are class logits ``(B, C)``."""


def teacher_probabilities(teacher_logits: Sequence[torch.Tensor], temperature: float) -> torch.Tensor:
    """The soft targets ``p_T``: the mean over teachers of ``softmax(z / T)``, ``(B, C)``."""
    if not teacher_logits:
        raise ValueError("distillation needs at least one teacher")
    return torch.stack([F.softmax(z.float() / temperature, dim=-1) for z in teacher_logits]).mean(dim=0)


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_probs: torch.Tensor,
    hard_loss: torch.Tensor,
    *,
    temperature: float,
    alpha: float,
) -> torch.Tensor:
    """``alpha * T^2 * KL(p_T || q_T) + (1 - alpha) * hard_loss`` (Hinton et al. 2015, Sec. 2).

    Args:
        student_logits: ``(B, C)``.
        teacher_probs: ``(B, C)`` soft targets (rows sum to 1), from :func:`teacher_probabilities`.
        hard_loss: the student's own loss on the true labels (a scalar).
        temperature: ``T > 0``.
        alpha: the soft term's weight in ``[0, 1]``.
    """
    if student_logits.shape != teacher_probs.shape:
        raise ValueError(
            f"student logits {tuple(student_logits.shape)} and teacher probabilities {tuple(teacher_probs.shape)} "
            "differ in shape (do the teachers have the student's classes?)"
        )
    log_q = F.log_softmax(student_logits.float() / temperature, dim=-1)
    kl = F.kl_div(log_q, teacher_probs, reduction="batchmean")  # sum_c p (log p - log q), averaged over rows
    return alpha * temperature**2 * kl + (1.0 - alpha) * hard_loss


class Distillation:
    """The distillation objective: ``(loss, output)`` of the student on a batch (see the module docstring).

    Args:
        teachers: frozen teacher models (``forward(batch).predictions`` are class logits); put in eval mode.
        temperature: ``T > 0``.
        alpha: the soft term's weight in ``[0, 1]``.

    Example:
        >>> import torch
        >>> class Linear(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = torch.nn.Linear(3, 2)
        ...     def forward(self, batch):
        ...         return ModelOutput(self.w(batch["x"]))
        ...     def loss(self, batch, output):
        ...         return torch.nn.functional.cross_entropy(output.predictions, batch["labels"])
        >>> objective = Distillation([Linear()], temperature=2.0, alpha=0.5)
        >>> loss, output = objective(Linear(), {"x": torch.randn(4, 3), "labels": torch.tensor([0, 1, 0, 1])})
        >>> loss.ndim, tuple(output.predictions.shape)
        (0, (4, 2))
    """

    def __init__(self, teachers: Sequence[nn.Module], *, temperature: float, alpha: float) -> None:
        if not teachers:
            raise ConfigError("distillation needs at least one teacher model")
        if temperature <= 0:
            raise ConfigError(f"temperature={temperature} must be > 0")
        if not 0 <= alpha <= 1:
            raise ConfigError(f"alpha={alpha} must be in [0, 1]")
        self.teachers = [teacher.eval().requires_grad_(False) for teacher in teachers]
        self.temperature = temperature
        self.alpha = alpha

    @torch.no_grad()
    def soft_targets(self, batch: dict[str, torch.Tensor], device: torch.device) -> torch.Tensor:
        """The teachers' soft targets ``p_T`` for ``batch``, ``(B, C)``, on ``device``."""
        logits = []
        for i, teacher in enumerate(self.teachers):
            if next(teacher.parameters()).device != device:
                self.teachers[i] = teacher = teacher.to(device)
            logits.append(teacher(batch).predictions)
        return teacher_probabilities(logits, self.temperature)

    def __call__(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ModelOutput]:
        output = model(batch)
        hard = cast("LossModel", model).loss(batch, output)
        soft = self.soft_targets(batch, output.predictions.device)
        loss = distillation_loss(output.predictions, soft, hard, temperature=self.temperature, alpha=self.alpha)
        return loss, output

    def __repr__(self) -> str:
        return f"Distillation(teachers={len(self.teachers)}, temperature={self.temperature}, alpha={self.alpha})"


@dataclass
class DistillationConfig:
    """``objective: {name: distill, teachers: [RUN_DIR, ...], temperature: 2.0, alpha: 0.5}``.

    Attributes:
        teachers: run directories of the teacher runs (a multi-seed directory stands for its seeds); required.
        temperature: ``T`` of the soft targets, > 0.
        alpha: weight of the soft term in ``[0, 1]`` (``0``: plain training).
        checkpoint: the teachers' weights: ``best`` or ``last``.
    """

    teachers: list[str] = field(default_factory=list)
    temperature: float = 2.0
    alpha: float = 0.5
    checkpoint: str = "best"

    def __post_init__(self) -> None:
        if self.temperature <= 0:
            raise ConfigError(f"objective.temperature={self.temperature} must be > 0")
        if not 0 <= self.alpha <= 1:
            raise ConfigError(f"objective.alpha={self.alpha} must be in [0, 1]")
        if self.checkpoint not in ("best", "last"):
            raise ConfigError(f"objective.checkpoint={self.checkpoint!r} must be 'best' or 'last'")

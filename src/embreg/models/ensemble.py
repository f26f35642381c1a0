"""An ensemble of trained models that averages their predictions, as one model the evaluators and serving take.

nlp-best-practices.txt ("Ensembling") recommends averaging the predictions of independently seeded models and of
the snapshots of one run (Huang et al. 2017). :class:`PredictionEnsemble` wraps models of one task and averages
their outputs where averaging is meaningful, then returns them in the space the single model returns, so every
evaluator and every serving method works on it unchanged:

=================  ===============================================  =============================================
combine            tasks                                            what is averaged, what is returned
=================  ===============================================  =============================================
``probabilities``  classification, lm                               softmax over the last dim; returns the log of
                                                                    the mean probabilities (``softmax`` of it is the
                                                                    mean, its argmax the ensemble's class)
``click``          ctr                                              sigmoid; returns the logit of the mean
                                                                    probability
``mean``           rating, regression, ranking, next-item           the predictions (ratings, values, scores)
=================  ===============================================  =============================================

It forwards ``forward(batch)``, ``score_all(users)`` (ranking), ``score_next(batch)`` (next-item) and
``forward_sequence(tokens, state)`` (language models: one state per member). An ensemble of one model, or of
identical models, predicts what that model predicts (up to float rounding of the averaging).

Example:
    >>> import torch
    >>> from embreg.models.output import ModelOutput
    >>> class Fixed(torch.nn.Module):
    ...     def __init__(self, logits):
    ...         super().__init__()
    ...         self.logits = logits
    ...     def forward(self, batch):
    ...         return ModelOutput(self.logits)
    >>> two = PredictionEnsemble([Fixed(torch.tensor([[0.0, 0.0]])), Fixed(torch.tensor([[0.0, 100.0]]))])
    >>> two({}).predictions.softmax(-1)  # the mean of (0.5, 0.5) and (0, 1)
    tensor([[0.2500, 0.7500]])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.models.output import ModelOutput

__all__ = ["PredictionEnsemble", "TASK_COMBINE", "combine_for_task", "combine_outputs"]

Combine = Literal["probabilities", "click", "mean"]

TASK_COMBINE: dict[str, Combine] = {
    "classification": "probabilities",
    "lm": "probabilities",
    "ctr": "click",
    "rating": "mean",
    "regression": "mean",
    "ranking": "mean",
    "next-item": "mean",
}
"""How the predictions of each task's models are averaged (tasks not named here are refused)."""


def combine_for_task(task: str) -> Combine:
    """The :data:`TASK_COMBINE` rule of ``task``.

    Raises:
        ConfigError: a task whose predictions embreg does not know how to average.
    """
    if task not in TASK_COMBINE:
        raise ConfigError(
            f"task {task!r} has no ensemble rule (how to average its models' predictions); ensembles serve "
            f"the tasks {', '.join(TASK_COMBINE)}"
        )
    return TASK_COMBINE[task]


def combine_outputs(predictions: Sequence[torch.Tensor], combine: Combine) -> torch.Tensor:
    """The members' predictions averaged by ``combine`` (see the module docstring), in the members' space.

    Args:
        predictions: one tensor per member, all of one shape (``(B, C)`` logits, ``(B,)`` logits or values, ...).
        combine: ``probabilities``, ``click`` or ``mean``.
    """
    if not predictions:
        raise ValueError("an ensemble needs at least one member's predictions")
    stacked = torch.stack([p.float() for p in predictions])
    if combine == "probabilities":
        # log of the mean probability, computed stably: logsumexp of the log-probabilities minus log(n)
        log_probs = torch.log_softmax(stacked, dim=-1)
        return torch.logsumexp(log_probs, dim=0) - torch.log(torch.tensor(float(len(predictions))))
    if combine == "click":
        mean = torch.sigmoid(stacked).mean(dim=0)
        return torch.logit(mean.double()).float()  # logit of exactly 0 or 1 is -inf / inf, as the probability says
    if combine == "mean":
        return stacked.mean(dim=0)
    raise ValueError(f"combine={combine!r} must be one of probabilities, click, mean")


class PredictionEnsemble(nn.Module):
    """Models of one task whose predictions are averaged (see the module docstring).

    Args:
        models: the members (each in eval mode when the ensemble predicts; the ensemble's ``eval()``/``train()``
            reaches them).
        combine: how to average (:data:`TASK_COMBINE` gives each task's; ``probabilities`` by default).

    Shapes: as the members' (``forward(batch).predictions``: ``(B, C)``, ``(B,)`` ...; ``score_all(users)``:
    ``(U, items)``).
    """

    def __init__(self, models: Sequence[nn.Module], combine: Combine = "probabilities") -> None:
        super().__init__()
        if not models:
            raise ValueError("an ensemble needs at least one model")
        if combine not in ("probabilities", "click", "mean"):
            raise ValueError(f"combine={combine!r} must be one of probabilities, click, mean")
        self.members = nn.ModuleList(models)
        self.combine = combine

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        outputs = [member(batch).predictions for member in self.members]
        return ModelOutput(combine_outputs(outputs, self.combine))

    def score_all(self, users: torch.Tensor) -> torch.Tensor:
        """The mean of the members' scores of every item, ``(U, items)`` (ranking models)."""
        return combine_outputs([member.score_all(users) for member in self.members], self.combine)  # type: ignore[operator]

    def score_next(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The mean of the members' next-item scores (next-item models)."""
        return combine_outputs([member.score_next(batch) for member in self.members], self.combine)  # type: ignore[operator]

    def forward_sequence(self, tokens: torch.Tensor, state: Any = None) -> tuple[ModelOutput, list[Any]]:
        """Language models: each member continues its own state; the next-token distributions are averaged."""
        states = state if state is not None else [None] * len(self.members)
        outputs, new_states = [], []
        for member, member_state in zip(self.members, states, strict=True):
            output, new_state = member.forward_sequence(tokens, member_state)  # type: ignore[operator]
            outputs.append(output.predictions)
            new_states.append(new_state)
        return ModelOutput(combine_outputs(outputs, self.combine)), new_states

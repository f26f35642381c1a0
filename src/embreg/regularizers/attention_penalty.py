"""The self-attention penalty: keep the hops of a self-attentive sentence embedding apart.

nlp-best-practices.txt, "Attention" > "Self-attention" (Lin et al., 2017): for each sentence's attention matrix
``A`` ``(r, T)``,

    P = ||A A^T - I||_F^2,

added to the loss as ``coefficient * mean over the batch of P`` (:func:`embreg.nn.attention.self_attentive.
attention_penalty`). A model offers it by providing the ``attention_matrix`` capability: its ``forward`` puts the
attention matrices of the batch in ``output.hidden["attention"]`` (the BiLSTM with self-attention,
``bilstm-attn``).

Cost: one ``(r, T) x (T, r)`` product per sentence on the clean forward's output; no extra forward or backward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from embreg.errors import ConfigError
from embreg.nn.attention.self_attentive import attention_penalty
from embreg.registry import register
from embreg.regularizers._checks import check_number
from embreg.regularizers.base import StepContext

__all__ = ["AttentionPenalty", "ATTENTION_KEY"]

ATTENTION_KEY = "attention"
"""The ``output.hidden`` key under which a model providing ``attention_matrix`` returns ``A`` ``(B, r, T)``."""


class AttentionPenalty:
    """``coefficient * mean_b ||A_b A_b^T - I||_F^2`` as a ``penalty`` hook.

    Args:
        coefficient: weight of the penalty (>= 0).

    Example:
        >>> from embreg.models.output import ModelOutput
        >>> a = torch.tensor([[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]])
        >>> ctx = StepContext(torch.nn.Identity(), {}, output=ModelOutput(torch.zeros(2), {"attention": a}))
        >>> AttentionPenalty(0.5).penalty(ctx).item()  # 0.5 * mean(2, 0)
        0.5
    """

    def __init__(self, coefficient: float = 1.0) -> None:
        self.coefficient = check_number(coefficient, "coefficient")

    def penalty(self, ctx: StepContext) -> torch.Tensor:
        """The weighted penalty of this step's attention matrices (a scalar)."""
        hidden = ctx.output.hidden if ctx.output is not None else {}
        if ATTENTION_KEY not in hidden:
            raise ConfigError(
                f"the attention penalty needs output.hidden[{ATTENTION_KEY!r}] (B, r, T) from the model's forward; "
                f"{type(ctx.model).__name__} returned {sorted(hidden)}"
            )
        return self.coefficient * attention_penalty(hidden[ATTENTION_KEY].float()).mean()


@dataclass
class AttentionPenaltyConfig:
    """``regularizers: [{name: attention-penalty, coefficient: 1.0}]`` (see :class:`AttentionPenalty`)."""

    coefficient: float = 1.0

    def __post_init__(self) -> None:
        check_number(self.coefficient, "regularizers.attention-penalty.coefficient")


@register(
    "regularizer",
    "attention-penalty",
    config=AttentionPenaltyConfig,
    requires=("attention_matrix",),
    summary="Frobenius penalty ||A A^T - I||_F^2 on a self-attentive sentence embedding's hops",
    reference="nlp-best-practices.txt, Attention > Self-attention (Lin et al., 2017)",
)
def build_attention_penalty(config: AttentionPenaltyConfig, context: Any) -> AttentionPenalty:
    return AttentionPenalty(config.coefficient)

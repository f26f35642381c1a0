"""The value every embreg model returns from ``forward``."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class ModelOutput:
    """What a model's ``forward(batch)`` returns.

    Attributes:
        predictions: the model's main output, e.g. predicted ratings ``(B,)`` or
            logits ``(B, C)``.
        hidden: named intermediate tensors that losses and regularisers may ask for
            (e.g. ``"user_vectors": (B, D)``).
    """

    predictions: torch.Tensor
    hidden: dict[str, torch.Tensor] = field(default_factory=dict)

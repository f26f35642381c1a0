"""How far apart two predictions are: symmetric KL for logits, squared error for regression outputs.

SMART and R3F measure the change of the model's output under an input perturbation with the symmetric
Kullback-Leibler divergence of the two predicted class distributions (classification) or the squared error of the
two predicted values (regression) (lnsr-noise-stability-bert.txt, Sec. 5.4 and the SMART and R3F papers it cites).
"""

from __future__ import annotations

from typing import Literal, cast

import torch
import torch.nn.functional as F

from embreg.errors import ConfigError

__all__ = ["symmetric_kl", "prediction_divergence", "stack_divergence", "DivergenceKind"]

DivergenceKind = Literal["auto", "sym_kl", "mse"]


def symmetric_kl(logits_a: torch.Tensor, logits_b: torch.Tensor) -> torch.Tensor:
    """``mean_i KL(p_i || q_i) + KL(q_i || p_i)`` with ``p = softmax(logits_a)``, ``q = softmax(logits_b)``.

    Args:
        logits_a, logits_b: ``(..., C)`` logits of one shape, e.g. ``(B, C)`` per example or ``(B, T, C)`` per
            token of a sequence (the mean is over every distribution); gradients flow into both.

    Returns:
        A scalar, 0 exactly when the two distributions are equal.

    Example:
        >>> symmetric_kl(torch.tensor([[1.0, 2.0]]), torch.tensor([[1.0, 2.0]])).item()
        0.0
    """
    if logits_a.shape != logits_b.shape or logits_a.dim() < 2:
        raise ConfigError(
            f"symmetric_kl needs two (..., C) logit tensors of one shape, got {tuple(logits_a.shape)} "
            f"and {tuple(logits_b.shape)}"
        )
    log_p = F.log_softmax(logits_a.float(), dim=-1)
    log_q = F.log_softmax(logits_b.float(), dim=-1)
    # (p - q) * (log p - log q) summed over classes is KL(p||q) + KL(q||p), written so it is exactly 0 at p = q.
    return ((log_p.exp() - log_q.exp()) * (log_p - log_q)).sum(dim=-1).mean()


def prediction_divergence(a: torch.Tensor, b: torch.Tensor, kind: DivergenceKind = "auto") -> torch.Tensor:
    """Symmetric KL of ``(B, C)`` logits or mean squared error of ``(B,)`` regression outputs.

    Args:
        a, b: predictions of one shape.
        kind: ``"sym_kl"``, ``"mse"`` or ``"auto"`` (``mse`` for 1-D predictions or ``(B, 1)``, else ``sym_kl``).

    Example:
        >>> prediction_divergence(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 4.0])).item()
        2.0
    """
    if a.shape != b.shape:
        raise ConfigError(f"predictions differ in shape: {tuple(a.shape)} vs {tuple(b.shape)}")
    if kind == "auto":
        kind = "mse" if a.dim() == 1 or a.shape[-1] == 1 else "sym_kl"
    if kind == "mse":
        return F.mse_loss(a.float(), b.float())
    if kind == "sym_kl":
        return symmetric_kl(a, b)
    raise ConfigError(f"divergence kind={kind!r} must be 'auto', 'sym_kl' or 'mse'")


def stack_divergence(requested: DivergenceKind, stack: object) -> DivergenceKind:
    """The divergence to use for a layer stack's predictions: ``requested``, or under ``"auto"`` the stack's own
    ``divergence`` (``"mse"`` for a head that returns hidden states, e.g. SASRec's).

    Raises:
        ConfigError: ``"sym_kl"`` asked of a stack whose predictions are hidden states (softmax over hidden units
            is not a predicted distribution).

    Example:
        >>> class States:
        ...     divergence = "mse"
        >>> stack_divergence("auto", States()), stack_divergence("auto", object())
        ('mse', 'auto')
    """
    own = getattr(stack, "divergence", "auto")
    if own == "mse" and requested == "sym_kl":
        raise ConfigError(
            f"divergence='sym_kl': the predictions of {type(stack).__name__} are hidden states, not logits; use "
            "divergence 'auto' or 'mse' (squared error)"
        )
    return cast(DivergenceKind, own) if requested == "auto" else requested

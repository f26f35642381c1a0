"""Non-finite weights and final metrics are failures, never results.

The trainer checks the loss of every step before it updates anything, so an update that turns the weights into NaN
or infinity shows only at the next step; after the last step of a run there is none. :func:`non_finite_parameters`
finds such weights (the trainer calls it after each epoch's steps), and :func:`check_final_metrics` refuses a run
whose headline metrics are not numbers, so that it exits non-zero instead of reporting ``nan``.

Example:
    >>> import torch
    >>> model = torch.nn.Linear(2, 1)
    >>> non_finite_parameters(model)
    []
    >>> with torch.no_grad():
    ...     model.bias.fill_(float("nan"))
    Parameter containing:
    tensor([nan], requires_grad=True)
    >>> non_finite_parameters(model)
    ['bias']
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from embreg.errors import TrainingError

__all__ = ["non_finite_parameters", "check_final_metrics", "DIVERGENCE_HINT"]

DIVERGENCE_HINT = "Try a lower learning rate, gradient clipping (clip_norm) or a smaller regulariser weight."


def non_finite_parameters(model: nn.Module) -> list[str]:
    """The names of ``model``'s parameters that hold a NaN or an infinity (one read-back to the host in all).

    Args:
        model: any module.

    Returns:
        Parameter names, in ``named_parameters`` order; empty when every weight is finite.
    """
    named = list(model.named_parameters())
    if not named:
        return []
    device = named[0][1].device  # one stack and one read-back, not one per parameter
    finite = torch.stack([torch.isfinite(p.detach()).all().to(device) for _, p in named]).tolist()
    return [name for (name, _), ok in zip(named, finite) if not ok]


def check_final_metrics(metrics: Mapping[str, Any], monitor: str, model: nn.Module, lr: float | None = None) -> None:
    """Raises when the run's headline metrics, ``monitor`` and its test twin, are not finite numbers.

    Other metrics may be NaN by definition (an AUC of a split with one class, an MSE of an empty group) and pass.

    Args:
        metrics: the run's final metrics.
        monitor: the validation metric that selects the best epoch, e.g. ``"val_rmse"``; ``"test_rmse"`` is
            checked with it where present.
        model: the trained model (its weights tell divergence apart from the other causes in the message).
        lr: the learning rate the run trained with, named in the message (``None``: not named).

    Raises:
        TrainingError: naming the metric, its value, and why: non-finite weights (training diverged); or, the
            weights being finite, the two causes left: predictions that overflow although the weights do not (a
            learning rate too high, named), or a metric the split cannot define.

    Example:
        >>> import torch
        >>> try:
        ...     check_final_metrics({"val_rmse": 0.9, "test_rmse": float("nan")}, "val_rmse", torch.nn.Linear(1, 1))
        ... except TrainingError as error:
        ...     print(str(error)[:45])
        the run's final test_rmse is nan; the model's
    """
    keys = [monitor]
    if monitor.startswith("val_"):
        keys.append("test_" + monitor[len("val_") :])
    bad = [(key, metrics[key]) for key in keys if key in metrics and not _finite(metrics[key])]
    if not bad:
        return
    key, value = bad[0]
    weights = non_finite_parameters(model)
    rate = f" (train.lr={lr:g})" if lr is not None else ""
    if weights:
        why = (
            f"the model's weights are not finite ({', '.join(weights[:3])}): training diverged{rate}. {DIVERGENCE_HINT}"
        )
    else:
        why = (
            "the model's weights are finite, so either training went astray without overflowing them (its outputs "
            f"overflow: a learning rate too high{rate}; try a lower one) or the split cannot define this metric "
            "(e.g. an AUC of a split holding one class, or an empty split: check the data section)"
        )
    raise TrainingError(f"the run's final {key} is {value}; {why}")


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False

"""Adam with the Transformer's learning-rate schedule: linear warm-up, then decay with the inverse square root.

Vaswani et al. 2017, Sec. 5.3 (the set-up of sse-stochastic-shared-embeddings.txt, Sec. 4.3):
``lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` with Adam ``beta1 = 0.9``, ``beta2 = 0.98``,
``eps = 1e-9``. Here the peak is given directly: ``lr_t = lr * min(step / W, sqrt(W / step))`` (1-based ``step``),
which is the paper's curve scaled so that it reaches ``lr`` at ``step = W`` (the paper's peak is
``d_model^-0.5 * W^-0.5``, 7.0e-4 for d_model 512 and W 4000). ``W`` is ``train.warmup`` (a fraction) of the run's
steps. The step counter lives in the optimizer's ``param_groups``, so a resumed run continues the schedule exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from embreg.errors import ConfigError

__all__ = ["inverse_sqrt_factor", "InverseSqrtAdam", "inverse_sqrt_adam_factory", "inverse_sqrt_optimizer"]

ADAM_BETAS = (0.9, 0.98)
ADAM_EPS = 1e-9


def inverse_sqrt_factor(step: int, warmup_steps: int) -> float:
    """Multiplier of the peak learning rate at 0-based ``step``: ``min(s / W, sqrt(W / s))`` with ``s = step + 1``.

    Example:
        >>> [round(inverse_sqrt_factor(s, 4), 3) for s in (0, 3, 15)]
        [0.25, 1.0, 0.5]
    """
    s, w = step + 1, max(warmup_steps, 1)
    return min(s / w, math.sqrt(w / s))


class InverseSqrtAdam(torch.optim.Adam):
    """``torch.optim.Adam`` (betas 0.9/0.98, eps 1e-9) whose learning rate follows :func:`inverse_sqrt_factor`.

    Args:
        params: parameters.
        lr: peak learning rate (reached at the end of the warm-up).
        warmup_steps: ``W`` >= 1.
        weight_decay: Adam's (L2) weight decay.

    Example:
        >>> opt = InverseSqrtAdam([torch.nn.Parameter(torch.zeros(1))], lr=1.0, warmup_steps=2)
        >>> for _ in range(4):
        ...     opt.step()
        >>> round(opt.param_groups[0]["lr"], 4)
        0.7071
    """

    def __init__(self, params: Iterable[Any], lr: float, warmup_steps: int, weight_decay: float = 0.0) -> None:
        if warmup_steps < 1:
            raise ConfigError(f"warmup_steps={warmup_steps} must be >= 1")
        super().__init__(params, lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=weight_decay)
        for group in self.param_groups:
            group.setdefault("peak_lr", group["lr"])
            group.setdefault("schedule_step", 0)
        self.warmup_steps = warmup_steps

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> Any:  # type: ignore[override]
        for group in self.param_groups:
            group["lr"] = group["peak_lr"] * inverse_sqrt_factor(group["schedule_step"], self.warmup_steps)
            group["schedule_step"] += 1
        return super().step(closure)


def inverse_sqrt_adam_factory(
    lr: float, total_steps: int, warmup: float, weight_decay: float = 0.0
) -> Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]:
    """``params -> InverseSqrtAdam`` warming up over ``round(warmup * total_steps)`` steps (at least 1).

    Example:
        >>> make = inverse_sqrt_adam_factory(1e-3, total_steps=100, warmup=0.1)
        >>> make(torch.nn.Linear(2, 2).parameters()).warmup_steps
        10
    """
    if lr <= 0:
        raise ConfigError(f"lr={lr} must be > 0")
    if not 0 < warmup < 1:
        raise ConfigError(f"train.warmup={warmup} must be in (0, 1) under train.schedule=inverse-sqrt")
    steps = max(1, int(round(warmup * total_steps)))
    return lambda params: InverseSqrtAdam(params, lr=lr, warmup_steps=steps, weight_decay=weight_decay)


def inverse_sqrt_optimizer(
    train: Any, steps_per_epoch: int
) -> Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]:
    """The factory for a recipe's ``train`` section under ``schedule: inverse-sqrt``.

    Raises:
        ConfigError: ``train.optimizer`` is not ``adam`` (the schedule brings its own Adam settings).
    """
    if train.optimizer != "adam":
        raise ConfigError(f"train.schedule='inverse-sqrt' runs with train.optimizer='adam', got {train.optimizer!r}")
    return inverse_sqrt_adam_factory(train.lr, train.epochs * steps_per_epoch, train.warmup, train.weight_decay)

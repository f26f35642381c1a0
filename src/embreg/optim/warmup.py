"""AdamW with the fine-tuning learning-rate schedule: linear warm-up, then linear decay to zero.

BERT fine-tuning (lnsr-noise-stability-bert.txt, Sec. 4.3, after Devlin et al.) warms the learning rate up over the
first 10% of the steps and decays it linearly afterwards. embreg's trainer takes an optimizer factory, so the
schedule lives in the optimizer: :class:`WarmupLinearAdamW` sets each group's ``lr`` before every step from a step
counter kept in its ``param_groups``, which ``state_dict()`` saves, so a resumed run continues the schedule exactly.
Unlike the paper's BERTAdam, Adam's bias correction is kept (Mosbach et al., 2020, find it steadies fine-tuning).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from embreg.errors import ConfigError

__all__ = ["WarmupLinearAdamW", "warmup_linear_factor", "warmup_adamw_factory"]


def warmup_linear_factor(step: int, total_steps: int, warmup_steps: int) -> float:
    """Multiplier of the base learning rate at ``step`` (0-based): ``(step+1)/warmup`` rising, then linear to 0.

    Example:
        >>> [round(warmup_linear_factor(s, 10, 2), 3) for s in (0, 1, 2, 9)]
        [0.5, 1.0, 1.0, 0.125]
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    remaining = total_steps - warmup_steps
    return max(0.0, (total_steps - step) / remaining) if remaining > 0 else 1.0


class WarmupLinearAdamW(torch.optim.AdamW):
    """``torch.optim.AdamW`` whose learning rate follows :func:`warmup_linear_factor` over ``total_steps``.

    Args:
        params: parameters or parameter groups.
        lr: peak learning rate.
        total_steps: optimisation steps of the whole run (>= 1).
        warmup: fraction of ``total_steps`` spent warming up, in ``[0, 1)``.
        weight_decay: decoupled weight decay.

    Example:
        >>> opt = WarmupLinearAdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0, total_steps=4, warmup=0.5)
        >>> for _ in range(3):
        ...     opt.step()
        >>> round(opt.param_groups[0]["lr"], 3)
        1.0
    """

    def __init__(
        self, params: Iterable[Any], lr: float, total_steps: int, warmup: float = 0.1, weight_decay: float = 0.0
    ) -> None:
        if total_steps < 1:
            raise ConfigError(f"total_steps={total_steps} must be >= 1")
        if not 0 <= warmup < 1:
            raise ConfigError(f"warmup={warmup} is outside [0, 1)")
        super().__init__(params, lr=lr, weight_decay=weight_decay)
        for group in self.param_groups:
            group.setdefault("peak_lr", group["lr"])
            group.setdefault("schedule_step", 0)
        self.total_steps = total_steps
        self.warmup_steps = int(round(warmup * total_steps))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> Any:  # type: ignore[override]
        for group in self.param_groups:
            group["lr"] = group["peak_lr"] * warmup_linear_factor(
                group["schedule_step"], self.total_steps, self.warmup_steps
            )
            group["schedule_step"] += 1
        return super().step(closure)


def warmup_adamw_factory(
    lr: float, total_steps: int, warmup: float = 0.1, weight_decay: float = 0.0
) -> Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]:
    """``params -> WarmupLinearAdamW`` for :class:`embreg.train.trainer.Trainer`.

    Example:
        >>> make = warmup_adamw_factory(2e-5, total_steps=100)
        >>> type(make(torch.nn.Linear(2, 2).parameters())).__name__
        'WarmupLinearAdamW'
    """
    if lr <= 0:
        raise ConfigError(f"lr={lr} must be > 0")
    return lambda params: WarmupLinearAdamW(
        params, lr=lr, total_steps=total_steps, warmup=warmup, weight_decay=weight_decay
    )

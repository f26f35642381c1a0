"""Learning-rate schedules by name (``train.schedule``): torch's own schedulers, stepped after every optimizer step.

One small table, :data:`SCHEDULES`, says what each schedule is, which ``train`` settings it reads and how to build
it; the recipe checks (:func:`check_schedule_settings`), the runner (:func:`scheduler_factory`) and resume
(:func:`fixed_length`) read it, so a new schedule is one :func:`register_schedule` call.

=================  =============================================  ==============================================
``train.schedule``  torch scheduler                                ``train`` settings it reads
=================  =============================================  ==============================================
``constant``        none                                           none
``linear``          :class:`~embreg.optim.warmup.WarmupLinearAdamW`  ``warmup`` (``adamw`` only; in the optimizer)
``inverse-sqrt``    :class:`~embreg.optim.inverse_sqrt.InverseSqrtAdam`  ``warmup``, required (``adam`` only; in the
                                                                   optimizer)
``cosine``          ``CosineAnnealingLR`` over the run's steps     ``min_lr``, ``warmup`` (``LinearLR`` warm-up
                                                                   first, through ``SequentialLR``)
``cosine-restarts`` ``CosineAnnealingWarmRestarts``                ``restart_epochs`` (T_0), ``restart_mult``
                                                                   (T_mult), ``min_lr``
``step``            ``StepLR``                                     ``step_epochs``, ``gamma``
``exponential``     ``ExponentialLR``                              ``gamma`` (per epoch)
``one-cycle``       ``OneCycleLR`` (peak ``train.lr``)             ``warmup`` (its rising fraction, ``pct_start``)
=================  =============================================  ==============================================

Periods are given in epochs and turned into steps (``steps_per_epoch`` = the trainer's batches per epoch), so a
warm restart or a step decay falls on an epoch boundary: the end of each cosine cycle is where a snapshot ensemble
keeps its snapshot (Huang et al. 2017, nlp-best-practices.txt "Ensembling"; :func:`cycle_end_epochs`). The
scheduler's state is saved in ``last.safetensors`` and restored on resume, so a resumed run follows the very same
learning rates as an uninterrupted one.

Example:
    >>> import torch
    >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    >>> make = scheduler_factory("cosine-restarts", epochs=4, settings={"restart_epochs": 1})
    >>> scheduler = make(opt, 2)
    >>> lrs = []
    >>> for _ in range(4):
    ...     opt.step(); scheduler.step(); lrs.append(round(opt.param_groups[0]["lr"], 3))
    >>> lrs  # two steps per epoch, a restart each epoch
    [0.5, 1.0, 0.5, 1.0]
    >>> cycle_end_epochs(restart_epochs=1, restart_mult=2, epochs=8)
    [0, 2, 6]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.optim.lr_scheduler import (
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    ExponentialLR,
    LinearLR,
    LRScheduler,
    OneCycleLR,
    SequentialLR,
    StepLR,
)

from embreg.errors import ConfigError, DataError

__all__ = [
    "Schedule",
    "SCHEDULES",
    "SCHEDULE_SETTINGS",
    "SchedulerFactory",
    "register_schedule",
    "schedule_names",
    "check_schedule_settings",
    "scheduler_factory",
    "fixed_length",
    "cycle_end_epochs",
    "check_scheduler_state",
]

SchedulerFactory = Callable[[torch.optim.Optimizer, int], LRScheduler]
"""``(optimizer, steps_per_epoch) -> scheduler``: what :class:`~embreg.train.trainer.Trainer` takes."""

SCHEDULE_SETTINGS: dict[str, str] = {
    "warmup": "fraction of the steps spent warming up",
    "min_lr": "the lowest learning rate of a cosine (eta_min)",
    "restart_epochs": "epochs of the first cosine cycle (T_0)",
    "restart_mult": "factor by which each cosine cycle is longer than the one before (T_mult)",
    "step_epochs": "epochs between two decays (StepLR's step_size)",
    "gamma": "the decay factor (per step_epochs for step, per epoch for exponential)",
}
"""The ``train`` fields a schedule may read; those it does not read are refused when set."""

UNSET: dict[str, Any] = {"warmup": 0.0}
"""The value that means "not set" for each setting (``None`` for those not named here)."""


@dataclass(frozen=True)
class Schedule:
    """One entry of :data:`SCHEDULES`.

    Attributes:
        name: the value of ``train.schedule``.
        summary: one line for the docs and errors.
        reads: the :data:`SCHEDULE_SETTINGS` it reads (the others are refused when set).
        required: those of ``reads`` that must be set.
        build: ``(optimizer, total_steps, steps_per_epoch, settings) -> scheduler``; ``None`` where the schedule
            needs no scheduler (``constant``, and ``linear``, which lives in its optimizer).
        fixed_length: the learning rates depend on the run's total steps, so ``train.epochs`` may not change on
            resume.
    """

    name: str
    summary: str
    reads: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    build: Callable[[torch.optim.Optimizer, int, int, Mapping[str, Any]], LRScheduler] | None = None
    fixed_length: bool = False


SCHEDULES: dict[str, Schedule] = {}
"""``train.schedule`` value -> :class:`Schedule`, in registration order."""


def register_schedule(schedule: Schedule) -> Schedule:
    """Adds ``schedule`` to :data:`SCHEDULES` (a name registered twice is an error)."""
    if schedule.name in SCHEDULES:
        raise ValueError(f"schedule {schedule.name!r} is registered already")
    unknown = [key for key in (*schedule.reads, *schedule.required) if key not in SCHEDULE_SETTINGS]
    if unknown or not set(schedule.required) <= set(schedule.reads):
        raise ValueError(f"schedule {schedule.name!r}: settings {unknown or schedule.required} are not all readable")
    SCHEDULES[schedule.name] = schedule
    return schedule


def schedule_names() -> tuple[str, ...]:
    return tuple(SCHEDULES)


def _get(name: str) -> Schedule:
    if name not in SCHEDULES:
        raise ConfigError(f"train.schedule={name!r} is not a schedule; choose one of {', '.join(SCHEDULES)}")
    return SCHEDULES[name]


def _is_set(key: str, value: Any) -> bool:
    return value != UNSET.get(key)


def check_schedule_settings(name: str, settings: Mapping[str, Any]) -> None:
    """Refuses an unknown schedule, a setting that ``name`` does not read (when set) and a missing required one.

    Args:
        name: ``train.schedule``.
        settings: the values of the :data:`SCHEDULE_SETTINGS` keys (``None``, or ``warmup=0``: not set).

    Raises:
        ConfigError: naming the setting, the schedules that read it and what to set.

    Example:
        >>> check_schedule_settings("cosine", {"restart_epochs": 2})
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: train.restart_epochs=2 (epochs of the first cosine cycle (T_0)) is read by train.schedule=cosine-restarts only, and train.schedule='cosine' would ignore it; set train.schedule=cosine-restarts or train.restart_epochs=null
    """
    schedule = _get(name)
    for key, value in settings.items():
        if key not in SCHEDULE_SETTINGS or key in schedule.reads or not _is_set(key, value):
            continue
        readers = [s.name for s in SCHEDULES.values() if key in s.reads]
        unset = "0" if key in UNSET else "null"
        raise ConfigError(
            f"train.{key}={value} ({SCHEDULE_SETTINGS[key]}) is read by train.schedule={'|'.join(readers)} only, "
            f"and train.schedule={name!r} would ignore it; set train.schedule={readers[0]} or train.{key}={unset}"
        )
    for key in schedule.required:
        if not _is_set(key, settings.get(key, UNSET.get(key))):
            raise ConfigError(f"train.schedule={name!r} needs train.{key} ({SCHEDULE_SETTINGS[key]})")
    _check_values(settings)


def _check_values(settings: Mapping[str, Any]) -> None:
    checks = {
        "min_lr": (lambda v: v >= 0, ">= 0"),
        "restart_epochs": (lambda v: v >= 1, ">= 1"),
        "restart_mult": (lambda v: v >= 1, ">= 1"),
        "step_epochs": (lambda v: v >= 1, ">= 1"),
        "gamma": (lambda v: 0 < v <= 1, "in (0, 1]"),
    }
    for key, (ok, valid) in checks.items():
        value = settings.get(key)
        if value is not None and not ok(value):
            raise ConfigError(f"train.{key}={value} must be {valid}")


def fixed_length(name: str) -> bool:
    """Whether the learning rates of ``name`` depend on the run's total steps (its epochs may not change)."""
    return name in SCHEDULES and SCHEDULES[name].fixed_length


def scheduler_factory(name: str, *, epochs: int, settings: Mapping[str, Any]) -> SchedulerFactory | None:
    """``(optimizer, steps_per_epoch) -> scheduler`` for ``name`` (``None``: the schedule needs no scheduler).

    Args:
        name: ``train.schedule``.
        epochs: ``train.epochs`` (the run's total steps are ``epochs * steps_per_epoch``).
        settings: the :data:`SCHEDULE_SETTINGS` values (checked by :func:`check_schedule_settings`).
    """
    check_schedule_settings(name, settings)
    build = _get(name).build
    if build is None:
        return None

    def make(optimizer: torch.optim.Optimizer, steps_per_epoch: int) -> LRScheduler:
        steps_per_epoch = max(int(steps_per_epoch), 1)
        return build(optimizer, epochs * steps_per_epoch, steps_per_epoch, settings)

    return make


def cycle_end_epochs(restart_epochs: int, restart_mult: int, epochs: int) -> list[int]:
    """The 0-based epochs at whose end a cosine cycle of ``CosineAnnealingWarmRestarts`` ends (a snapshot's epoch).

    Cycle ``i`` lasts ``restart_epochs * restart_mult**i`` epochs; cycles not finished within ``epochs`` are left out.
    """
    ends, length, end = [], restart_epochs, restart_epochs
    while end <= epochs:
        ends.append(end - 1)
        length *= restart_mult
        end += length
    return ends


def _warmup_steps(settings: Mapping[str, Any], total_steps: int) -> int:
    return int(round(float(settings.get("warmup") or 0.0) * total_steps))


def _cosine(opt: torch.optim.Optimizer, total: int, per_epoch: int, s: Mapping[str, Any]) -> LRScheduler:
    warm = _warmup_steps(s, total)
    eta_min = float(s.get("min_lr") or 0.0)
    cosine = CosineAnnealingLR(opt, T_max=max(total - warm, 1), eta_min=eta_min)
    if warm == 0:
        return cosine
    # the warm-up rises as (step + 1) / warm, as train.schedule=linear's does (embreg.optim.warmup)
    rise = LinearLR(opt, start_factor=1.0 / warm, end_factor=1.0, total_iters=warm - 1 if warm > 1 else 1)
    return SequentialLR(opt, [rise, cosine], milestones=[warm])


def _restarts(opt: torch.optim.Optimizer, total: int, per_epoch: int, s: Mapping[str, Any]) -> LRScheduler:
    mult = int(s.get("restart_mult") or 1)
    eta_min = float(s.get("min_lr") or 0.0)
    return CosineAnnealingWarmRestarts(opt, T_0=int(s["restart_epochs"]) * per_epoch, T_mult=mult, eta_min=eta_min)


def _step(opt: torch.optim.Optimizer, total: int, per_epoch: int, s: Mapping[str, Any]) -> LRScheduler:
    gamma = 0.1 if s.get("gamma") is None else float(s["gamma"])
    return StepLR(opt, step_size=int(s["step_epochs"]) * per_epoch, gamma=gamma)


def _exponential(opt: torch.optim.Optimizer, total: int, per_epoch: int, s: Mapping[str, Any]) -> LRScheduler:
    # gamma is per epoch; stepped per step, the factor is its per_epoch-th root (lr * gamma**epoch at each boundary)
    return ExponentialLR(opt, gamma=math.pow(float(s["gamma"]), 1.0 / per_epoch))


def _one_cycle(opt: torch.optim.Optimizer, total: int, per_epoch: int, s: Mapping[str, Any]) -> LRScheduler:
    rise = float(s.get("warmup") or 0.0) or 0.3  # torch's default pct_start when train.warmup is not set
    peak = [group["lr"] for group in opt.param_groups]
    return OneCycleLR(opt, max_lr=peak, total_steps=max(total, 2), pct_start=rise, cycle_momentum=False)


register_schedule(Schedule("constant", "the learning rate train.lr throughout"))
register_schedule(
    Schedule(
        "linear",
        "linear warm-up over train.warmup of the steps, then linear decay to 0 (adamw only)",
        reads=("warmup",),
        fixed_length=True,
    )
)
register_schedule(
    Schedule(
        "cosine",
        "cosine annealing from train.lr to train.min_lr over the run (CosineAnnealingLR), after an optional "
        "linear warm-up (train.warmup)",
        reads=("min_lr", "warmup"),
        build=_cosine,
        fixed_length=True,
    )
)
register_schedule(
    Schedule(
        "cosine-restarts",
        "cosine annealing with warm restarts every train.restart_epochs, each cycle train.restart_mult times "
        "longer (CosineAnnealingWarmRestarts; SGDR, the snapshot ensembles' schedule)",
        reads=("restart_epochs", "restart_mult", "min_lr"),
        required=("restart_epochs",),
        build=_restarts,
    )
)
register_schedule(
    Schedule(
        "step",
        "train.lr times train.gamma (default 0.1) every train.step_epochs epochs (StepLR)",
        reads=("step_epochs", "gamma"),
        required=("step_epochs",),
        build=_step,
    )
)
register_schedule(
    Schedule(
        "exponential",
        "train.lr times train.gamma per epoch, decayed smoothly step by step (ExponentialLR)",
        reads=("gamma",),
        required=("gamma",),
        build=_exponential,
    )
)
register_schedule(
    Schedule(
        "one-cycle",
        "one cycle: up to train.lr over train.warmup of the steps (0.3 when 0), then down by a cosine "
        "(OneCycleLR, learning rate only)",
        reads=("warmup",),
        build=_one_cycle,
        fixed_length=True,
    )
)


def _same_shape(saved: Any, fresh: Any, where: str) -> str | None:
    """Where ``saved`` differs from ``fresh`` in keys or value types (``None``: it fits)."""
    if isinstance(fresh, Mapping):
        if not isinstance(saved, Mapping):
            return f"{where or 'its state'} is not a mapping"
        missing = [k for k in fresh if k not in saved]
        extra = [k for k in saved if k not in fresh]
        if missing or extra:
            return (
                f"{where or 'its state'} lacks {missing}" if missing else f"{where or 'its state'} has unknown {extra}"
            )
        for key, value in fresh.items():
            found = _same_shape(saved[key], value, f"{where}.{key}" if where else str(key))
            if found:
                return found
        return None
    if isinstance(fresh, list | tuple):
        if not isinstance(saved, list | tuple) or len(saved) != len(fresh):
            return f"{where} holds {saved!r}, not {len(fresh)} values"
        for i, (a, b) in enumerate(zip(saved, fresh, strict=True)):
            found = _same_shape(a, b, f"{where}[{i}]")
            if found:
                return found
        return None
    numbers = (int, float)
    if isinstance(fresh, bool) or not isinstance(fresh, numbers):
        if fresh is not None and type(saved) is not type(fresh):
            return f"{where} holds {saved!r}, not a {type(fresh).__name__}"
        return None
    if isinstance(saved, bool) or not isinstance(saved, numbers) or not math.isfinite(float(saved)):
        return f"{where} holds {saved!r}, not a finite number"
    return None


def check_scheduler_state(saved: Any, scheduler: LRScheduler, source: str) -> None:
    """Refuses a checkpoint's scheduler state that does not fit ``scheduler`` (missing, other keys, other types).

    Raises:
        DataError: naming the checkpoint and the first entry that does not fit.

    Example:
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        >>> scheduler = StepLR(opt, step_size=2)
        >>> check_scheduler_state({**scheduler.state_dict(), "step_size": "two"}, scheduler, "'last.safetensors'")
        Traceback (most recent call last):
        ...
        embreg.errors.DataError: checkpoint 'last.safetensors' does not fit the learning-rate schedule: step_size holds 'two', not a finite number. Start the run afresh (without --resume, or in a new directory)
    """
    problem: str | None = "it holds no scheduler state (written without this train.schedule?)"
    if saved is not None:
        problem = _same_shape(saved, scheduler.state_dict(), "")
    if problem:
        raise DataError(
            f"checkpoint {source} does not fit the learning-rate schedule: {problem}. "
            "Start the run afresh (without --resume, or in a new directory)"
        )


register_schedule(
    Schedule(
        "inverse-sqrt",
        "the Transformer's: linear warm-up over train.warmup of the steps to train.lr, then train.lr * sqrt(W / step) "
        "(adam only, betas 0.9/0.98; embreg.optim.inverse_sqrt, in the optimizer)",
        reads=("warmup",),
        required=("warmup",),
        fixed_length=True,
    )
)

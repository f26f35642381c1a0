"""Optimizers by name, so recipes can choose one with a string."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

OPTIMIZERS = ("adam", "amsgrad", "adamw", "sgd", "adagrad")
OptimizerFactory = Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]


def optimizer_factory(name: str, lr: float, weight_decay: float = 0.0, momentum: float = 0.0) -> OptimizerFactory:
    """Returns ``params -> optimizer`` for ``name`` in :data:`OPTIMIZERS`.

    ``amsgrad`` is Adam with AMSGrad's running maximum of the second moment (``torch.optim.Adam(amsgrad=True)``),
    the optimizer of mixed-dimension-embeddings.txt, Appendix H-I.

    A factory (not an optimizer) because regularisers may change the model's parameters in ``prepare`` before the
    optimizer is built.

    Example:
        >>> make = optimizer_factory("adam", lr=1e-3)
        >>> type(make(torch.nn.Linear(2, 2).parameters())).__name__
        'Adam'
    """
    if lr <= 0:
        raise ValueError(f"lr={lr} must be > 0")
    if weight_decay < 0:
        raise ValueError(f"weight_decay={weight_decay} must be >= 0")
    if name == "adam":
        return lambda params: torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if name == "amsgrad":
        return lambda params: torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, amsgrad=True)
    if name == "adamw":
        return lambda params: torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    if name == "sgd":
        return lambda params: torch.optim.SGD(params, lr=lr, weight_decay=weight_decay, momentum=momentum)
    if name == "adagrad":
        return lambda params: torch.optim.Adagrad(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")

"""Optimizers by name, so recipes can choose one with a string."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from embreg.errors import ConfigError
from embreg.optim.lazy_adam import LazyAdam

OPTIMIZERS = ("adam", "amsgrad", "adamw", "sgd", "adagrad", "sparse-adam")
SPARSE_OPTIMIZERS = ("sparse-adam", "sgd", "adagrad")
"""The optimizers of :data:`OPTIMIZERS` that take sparse gradients (``adam``, ``amsgrad`` and ``adamw`` do not)."""
OptimizerFactory = Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]


def optimizer_factory(name: str, lr: float, weight_decay: float = 0.0, momentum: float = 0.0) -> OptimizerFactory:
    """Returns ``params -> optimizer`` for ``name`` in :data:`OPTIMIZERS`.

    ``amsgrad`` is Adam with AMSGrad's running maximum of the second moment (``torch.optim.Adam(amsgrad=True)``),
    the optimizer of mixed-dimension-embeddings.txt, Appendix H-I. ``sparse-adam`` is
    :class:`~embreg.optim.lazy_adam.LazyAdam`: Adam on dense gradients, lazy Adam (only the rows of the batch) on
    the sparse gradients of sparse tables; it takes no weight decay.

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
    if name == "sparse-adam":
        if weight_decay > 0:
            raise ValueError(
                f"weight_decay={weight_decay}: sparse-adam takes no weight decay (decay would touch every row of a "
                "table each step); use weight_decay=0 (e.g. the models' own l2 on the looked-up rows)"
            )
        return lambda params: LazyAdam(params, lr=lr)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")


def sparse_gradient_modules(model: torch.nn.Module) -> list[str]:
    """Names of the modules of ``model`` that produce sparse gradients (``sparse=True`` tables).

    Example:
        >>> model = torch.nn.ModuleDict({"users": torch.nn.Embedding(3, 2, sparse=True), "out": torch.nn.Linear(2, 1)})
        >>> sparse_gradient_modules(model)
        ['users']
    """
    return [name for name, module in model.named_modules() if getattr(module, "sparse", False) is True]


def check_sparse_gradients(
    model: torch.nn.Module, optimizer: str, *, weight_decay: float = 0.0, clip_norm: float | None = None
) -> None:
    """Refuses, before anything trains, training settings that cannot take the sparse gradients of ``model``.

    Sparse tables (``embeddings: {name: ..., sparse: true}``) need an optimizer of :data:`SPARSE_OPTIMIZERS`
    without weight decay (``torch.optim.SGD`` and ``Adagrad`` cannot add a decay to a sparse gradient) and no
    gradient-norm clipping (``clip_grad_norm_`` cannot take sparse gradients). A model without sparse tables passes.

    Raises:
        ConfigError: naming the sparse modules and the settings to change.

    Example:
        >>> check_sparse_gradients(torch.nn.Embedding(4, 2, sparse=True), "adam")
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: the tables [''] have sparse gradients (embeddings.sparse=true), which train.optimizer='adam' cannot take: set train.optimizer=sparse-adam (lazy Adam: only the rows of each batch are updated; sgd and adagrad also take them), or embeddings.sparse=false
    """
    sparse = sparse_gradient_modules(model)
    if not sparse:
        return
    where = f"the tables {sparse[:4]}{' ...' if len(sparse) > 4 else ''} have sparse gradients (embeddings.sparse=true)"
    if optimizer not in SPARSE_OPTIMIZERS:
        raise ConfigError(
            f"{where}, which train.optimizer={optimizer!r} cannot take: set train.optimizer=sparse-adam (lazy Adam: "
            "only the rows of each batch are updated; sgd and adagrad also take them), or embeddings.sparse=false"
        )
    if weight_decay > 0:
        raise ConfigError(
            f"{where}, which train.optimizer={optimizer!r} cannot decay: set train.weight_decay=0 (the models' own "
            "l2 acts on the looked-up rows), or embeddings.sparse=false"
        )
    if clip_norm is not None:
        raise ConfigError(
            f"{where}, which gradient-norm clipping cannot take: set train.clip_norm=null, or embeddings.sparse=false"
        )

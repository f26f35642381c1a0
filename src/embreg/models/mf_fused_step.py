"""A fused training step for biased MF on sparse tables: forward, loss, backward and update in one C++ call.

The autograd step of :class:`~embreg.models.BiasedMF` runs some forty tensor ops, two sparse gradients and an
optimizer written with tensor ops; on a 1,024-rating batch their fixed costs, not the rows' memory traffic, are
the step (docs/results/scale-mf-epoch). ``csrc/mf_step.cpp`` computes the same step in three passes over the
batch (errors and loss; each distinct row's summed gradient; the update of those rows). It serves the model
as ``train.fused_step: true`` trains it:

* user and item tables ``nn.Embedding(sparse=True)`` (``embeddings: {name: uniform, sparse: true}``), the bias
  tables dense, float32, on the CPU, no dropout on the vectors (``model.dropout: 0``);
* the optimizer ``sparse-adam`` (:class:`~embreg.optim.lazy_adam.LazyAdam`: lazy Adam on the tables' rows,
  Adam on the biases) or ``sgd`` without momentum or weight decay, in one parameter group;
* index transforms (SSE-SE, SSE-Graph) run as in the autograd step, on the ids before the kernel.

The step reads and writes the optimizer's own state, so checkpoints, resume and a switch between the fused and
the autograd step carry on exactly. Results equal the autograd step up to float rounding (gradients are summed
in another order; tested to 1e-5 over many steps). Paper: sse-stochastic-shared-embeddings.txt, Sec. 4.1
(biased MF, squared loss).

``EMBREG_MF_KERNEL`` chooses: ``auto`` (default; the kernel when it builds, else the autograd step after one
warning), ``off`` (always the autograd step) or ``on`` (the kernel, raise if it cannot be built).

Example:
    >>> from embreg.models.mf import BiasedMF
    >>> from embreg.models.user_item import zero_table
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> model = BiasedMF(torch.nn.Embedding(4, 8, sparse=True), torch.nn.Embedding(5, 8, sparse=True),
    ...                  zero_table(4), zero_table(5), global_mean=3.0)
    >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> step = fused_mf_step(model, optimizer)
    >>> batch = {"user": torch.tensor([0, 1]), "item": torch.tensor([2, 2]), "rating": torch.tensor([4.0, 2.0])}
    >>> loss = step(batch) if step is not None else float(model.loss(batch, model(batch)))
    >>> round(loss, 2) > 0
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, cast

import torch
from torch import nn

from embreg._native import NativeKernel
from embreg.errors import ConfigError

__all__ = ["FusedMFModel", "FusedMFStep", "fused_mf_step", "fused_step_refusal"]


class FusedMFModel(Protocol):
    """What the fused step reads of a biased MF model (:class:`~embreg.models.BiasedMF` has all of it)."""

    @property
    def user_embedding(self) -> nn.Module: ...
    @property
    def item_embedding(self) -> nn.Module: ...
    @property
    def user_bias(self) -> nn.Module: ...
    @property
    def item_bias(self) -> nn.Module: ...
    @property
    def user_transform(self) -> nn.Module: ...
    @property
    def item_transform(self) -> nn.Module: ...
    @property
    def vector_dropout(self) -> nn.Dropout: ...
    @property
    def l2(self) -> float: ...
    @property
    def global_mean(self) -> Any: ...
    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...


_KERNEL = NativeKernel(
    "embreg_mf_step",
    Path(__file__).with_name("csrc") / "mf_step.cpp",
    "EMBREG_MF_KERNEL",
    "MF training step",
    native_isa=True,
    extra_flags=("-fno-math-errno",),  # sqrt never sets errno here, so the Adam loops vectorise
    record_key="mf_step",
)


def _table_refusal(name: str, table: nn.Module, *, sparse: bool, dim: int | None = None) -> str | None:
    if not isinstance(table, nn.Embedding):
        return f"the {name} table is a {type(table).__name__}, not an nn.Embedding (e.g. mixed-dimension tables)"
    if table.sparse is not sparse:
        return f"the {name} table must {'' if sparse else 'not '}be sparse" + (
            " (embeddings: {name: uniform, sparse: true})" if sparse else ""
        )
    if table.max_norm is not None or table.scale_grad_by_freq or table.padding_idx is not None:
        return f"the {name} table uses max_norm, scale_grad_by_freq or padding_idx"
    weight = table.weight
    if weight.dtype != torch.float32 or weight.device.type != "cpu" or not weight.is_contiguous():
        return f"the {name} table is {weight.dtype} on {weight.device}; the fused step takes float32 on the CPU"
    if dim is not None and weight.shape[1] != dim:
        return f"the {name} table has {weight.shape[1]} columns, not {dim}"
    return None


def _optimizer_refusal(optimizer: torch.optim.Optimizer, params: list[nn.Parameter]) -> str | None:
    if len(optimizer.param_groups) != 1 or {id(p) for p in optimizer.param_groups[0]["params"]} != {
        id(p) for p in params
    }:
        return "the optimizer must hold exactly the model's four tables, in one parameter group"
    group = optimizer.param_groups[0]
    if getattr(optimizer, "sparse_update", None) == "lazy-adam":
        return None
    if isinstance(optimizer, torch.optim.SGD):
        if group["momentum"] or group["weight_decay"] or group["nesterov"] or group.get("maximize"):
            return "sgd takes the fused step only without momentum, weight decay, nesterov or maximize"
        return None
    return (
        f"the optimizer is {type(optimizer).__name__}; the fused step implements sparse-adam (lazy Adam) and sgd "
        "(train.optimizer=sparse-adam or sgd)"
    )


def _weights(model: FusedMFModel) -> list[torch.Tensor]:
    """The weights of MF's four tables (user and item vectors, user and item biases)."""
    tables = (model.user_embedding, model.item_embedding, model.user_bias, model.item_bias)
    return [cast(nn.Embedding, table).weight for table in tables]


def fused_step_refusal(model: FusedMFModel, optimizer: torch.optim.Optimizer) -> str | None:
    """Why ``model`` and ``optimizer`` cannot take the fused step, or None when they can."""
    if model.vector_dropout.p > 0:
        return f"model.dropout={model.vector_dropout.p}: dropout on the vectors needs the autograd step"
    checks = [
        _table_refusal("user", model.user_embedding, sparse=True),
        _table_refusal("item", model.item_embedding, sparse=True),
    ]
    if checks[0] is None and checks[1] is None:
        dim = _weights(model)[0].shape[1]
        checks += [
            _table_refusal("item", model.item_embedding, sparse=True, dim=dim),
            _table_refusal("user bias", model.user_bias, sparse=False, dim=1),
            _table_refusal("item bias", model.item_bias, sparse=False, dim=1),
        ]
    refusal = next((reason for reason in checks if reason is not None), None)
    if refusal is not None:
        return refusal
    params = [p for p in model.parameters() if p.requires_grad]
    if len(params) != 4:
        return f"the model has {len(params)} trainable parameters; the fused step trains the four tables of MF"
    return _optimizer_refusal(optimizer, params)


class FusedMFStep:
    """``step(batch) -> loss``: one training step of ``model`` through the C++ kernel (see the module docstring).

    Args:
        model: a :class:`~embreg.models.BiasedMF` in training mode (its index transforms draw in training mode).
        optimizer: its ``sparse-adam`` or ``sgd`` optimizer.
        kernel: the compiled ``mf_step`` module.

    Raises:
        ConfigError: naming what keeps the model or optimizer off the fused step.
    """

    def __init__(self, model: FusedMFModel, optimizer: torch.optim.Optimizer, kernel: Any) -> None:
        refusal = fused_step_refusal(model, optimizer)
        if refusal is not None:
            raise ConfigError(f"train.fused_step: {refusal}")
        self.model, self.optimizer, self.kernel = model, optimizer, kernel
        self.tables = _weights(model)
        self.rule = "sgd" if isinstance(optimizer, torch.optim.SGD) else "adam"
        self.transforms = [
            None if isinstance(t, nn.Identity) else t for t in (model.user_transform, model.item_transform)
        ]
        self.user_slots = torch.full((self.tables[0].shape[0],), -1, dtype=torch.int32)
        self.item_slots = torch.full((self.tables[1].shape[0],), -1, dtype=torch.int32)

    def _state(self) -> list[torch.Tensor]:
        if self.rule == "sgd":
            return []
        states = [self.optimizer.param_state(p) for p in self.tables]  # type: ignore[attr-defined]
        return [s[key] for s in states for key in ("step", "exp_avg", "exp_avg_sq")]

    @torch.no_grad()
    def __call__(self, batch: dict[str, torch.Tensor]) -> float:
        """One step on ``batch`` (``user``, ``item`` ``(B,)`` int64, ``rating`` ``(B,)`` float32); returns the
        batch loss (mean squared error plus the model's L2 term). A non-finite loss leaves every parameter as it
        was."""
        model, group = self.model, self.optimizer.param_groups[0]
        users, items = (
            (ids if transform is None else transform(ids)).contiguous()
            for ids, transform in zip((batch["user"], batch["item"]), self.transforms)
        )
        ratings = batch["rating"].to(torch.float32).contiguous()
        beta1, beta2 = group.get("betas", (0.0, 0.0))
        return self.kernel.mf_step(
            users, items, ratings, *self.tables, float(cast(torch.Tensor, model.global_mean)), float(model.l2), self.rule,
            float(group["lr"]), float(beta1), float(beta2), float(group.get("eps", 0.0)), self._state(),
            self.user_slots, self.item_slots,
        )  # fmt: skip


def fused_mf_step(model: FusedMFModel, optimizer: torch.optim.Optimizer) -> FusedMFStep | None:
    """The fused step of ``model``, or None where the kernel is off or (``EMBREG_MF_KERNEL=auto``) cannot be built:
    the caller then takes the autograd step, which computes the same.

    Raises:
        ConfigError: the model or optimizer cannot take the fused step (the message says why).
        EmbregError: ``EMBREG_MF_KERNEL=on`` and the kernel cannot be built.
    """
    refusal = fused_step_refusal(model, optimizer)
    if refusal is not None:
        raise ConfigError(f"train.fused_step: {refusal}")
    kernel = _KERNEL.load()
    return None if kernel is None else FusedMFStep(model, optimizer, kernel)

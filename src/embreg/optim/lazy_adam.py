"""``LazyAdam``: one optimizer for dense and sparse gradients (recipe name ``sparse-adam``).

Adam (Kingma & Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015, Algorithm 1), for a parameter
``theta`` with gradient ``g_t`` at its ``t``-th step::

    m_t     = beta1 m_{t-1} + (1 - beta1) g_t
    v_t     = beta2 v_{t-1} + (1 - beta2) g_t^2
    theta_t = theta_{t-1} - lr sqrt(1 - beta2^t) / (1 - beta1^t) * m_t / (sqrt(v_t) + eps)

A parameter whose gradient is dense (projections, MLP layers, biases of dense tables) takes exactly this step,
through ``torch.optim.adam.adam``, the function ``torch.optim.Adam`` calls: the result equals ``torch.optim.Adam``
(no weight decay, no AMSGrad).

A parameter whose gradient is *sparse* (``nn.Embedding(sparse=True)``, ``nn.EmbeddingBag(sparse=True)``, sparse
mixed-dimension tables) takes "lazy Adam", the rule of ``torch.optim.SparseAdam`` and TensorFlow Addons'
``LazyAdam``: the gradient is coalesced (duplicate rows summed), and only its rows ``R`` are touched::

    m_t[R]     = beta1 m_{t-1}[R] + (1 - beta1) g_t[R]
    v_t[R]     = beta2 v_{t-1}[R] + (1 - beta2) g_t[R]^2
    theta_t[R] = theta_{t-1}[R] - lr sqrt(1 - beta2^t) / (1 - beta1^t) * m_t[R] / (sqrt(v_t[R]) + eps)

Rows absent from the batch keep their parameters *and their moments* (dense Adam would decay their moments and
keep moving them by their old momentum), so the results differ from dense Adam; ``t`` is the parameter's step
count (steps in which it had a gradient), as in ``SparseAdam``. The cost of a step is proportional to the rows of
the batch, not to the table. Weight decay is not offered (it would have to touch every row).

The state (``step``, ``exp_avg``, ``exp_avg_sq`` per parameter, as ``torch.optim.Adam``'s) holds only tensors, so
``state_dict()`` round-trips through :func:`embreg.runs.checkpoint.save_checkpoint`.

Example:
    >>> table = torch.nn.Embedding(5, 2, sparse=True)
    >>> before = table.weight.detach().clone()
    >>> optimizer = LazyAdam(table.parameters(), lr=0.1)
    >>> table(torch.tensor([1, 3, 3])).sum().backward()
    >>> optimizer.step()
    >>> (table.weight != before).any(dim=1).tolist()   # only rows 1 and 3 moved
    [False, True, False, True, False]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.optim.adam import adam

__all__ = ["LazyAdam"]


def _scalar_dtype() -> torch.dtype:
    """The dtype ``torch.optim.Adam`` keeps its step counter in."""
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


class LazyAdam(torch.optim.Optimizer):
    """Adam on dense gradients, lazy Adam on sparse ones (see the module docstring).

    Args:
        params: parameters or parameter groups.
        lr: learning rate.
        betas: ``(beta1, beta2)``, the moments' decay rates.
        eps: added to ``sqrt(v)`` in the denominator.

    Raises:
        ValueError: an argument out of range, or a sparse gradient with more than one sparse dimension (the
            tables give sparse gradients over rows only).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        if not lr > 0:
            raise ValueError(f"lr={lr} must be > 0")
        if not eps > 0:
            raise ValueError(f"eps={eps} must be > 0")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"betas[{i}]={beta} is outside [0, 1)")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps})

    sparse_update = "lazy-adam"
    """How the optimizer updates the rows of a sparse gradient (read by fused training steps, e.g.
    :mod:`embreg.models.mf_fused_step`, which update the same state)."""

    def param_state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        """The state of parameter ``p`` (``step``, ``exp_avg``, ``exp_avg_sq``), made (zeros) on first use."""
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0, dtype=_scalar_dtype())
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One step for every parameter with a gradient (dense: Adam; sparse: lazy Adam on the gradient's rows)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps = group["lr"], group["eps"]
            dense: tuple[list[torch.Tensor], ...] = ([], [], [], [], [])  # params, grads, m, v, steps
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.param_state(p)
                if p.grad.is_sparse:
                    state["step"] += 1
                    _lazy_adam_rows(
                        p, p.grad, state["exp_avg"], state["exp_avg_sq"], float(state["step"]), lr, beta1, beta2, eps
                    )
                else:  # the functional Adam counts the step itself
                    for bucket, value in zip(dense, (p, p.grad, state["exp_avg"], state["exp_avg_sq"], state["step"])):
                        bucket.append(value)
            if dense[0]:
                adam(
                    dense[0],
                    dense[1],
                    dense[2],
                    dense[3],
                    [],
                    dense[4],
                    foreach=None,  # as torch.optim.Adam's default: foreach on CUDA, one tensor at a time on the CPU
                    capturable=False,
                    differentiable=False,
                    fused=None,
                    has_complex=any(torch.is_complex(p) for p in dense[0]),
                    amsgrad=False,
                    beta1=beta1,
                    beta2=beta2,
                    lr=lr,
                    weight_decay=0.0,
                    eps=eps,
                    maximize=False,
                )
        return loss


def _lazy_adam_rows(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    step: float,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
) -> None:
    """Lazy Adam on the rows of a sparse ``grad``: the arithmetic of ``torch.optim.SparseAdam`` (so the same numbers),
    with the rows gathered by ``index_select`` and written back by ``index_copy_`` / ``index_add_``."""
    grad = grad.coalesce()  # the update is not linear in the gradient: duplicate rows are summed first
    if grad.sparse_dim() != 1:
        raise ValueError(
            f"LazyAdam takes sparse gradients over rows (one sparse dimension, as nn.Embedding(sparse=True) gives), "
            f"got {grad.sparse_dim()} sparse dimensions for a parameter of shape {tuple(param.shape)}"
        )
    values = grad.values()
    if values.numel() == 0:
        return
    rows = grad.indices()[0]
    old_m = exp_avg.index_select(0, rows)
    old_v = exp_avg_sq.index_select(0, rows)
    m = values.sub(old_m).mul_(1 - beta1).add_(old_m)  # old + (1 - b1)(g - old) = b1 old + (1 - b1) g
    v = values.pow(2).sub_(old_v).mul_(1 - beta2).add_(old_v)
    exp_avg.index_copy_(0, rows, m)
    exp_avg_sq.index_copy_(0, rows, v)
    step_size = lr * math.sqrt(1 - beta2**step) / (1 - beta1**step)
    param.index_add_(0, rows, m.div_(v.sqrt_().add_(eps)).mul_(-step_size))

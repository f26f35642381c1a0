"""The dropout-free forward pass ``F(x)`` that the analytic regularisers differentiate, shared within one step."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch

from embreg.models.output import ModelOutput
from embreg.nn.dropout_control import dropout_active, dropout_disabled
from embreg.regularizers.base import StepContext

if TYPE_CHECKING:
    from embreg.models.protocols import LossModel

_KEY = "dropout.clean_pass"


def clean_pass(ctx: StepContext) -> tuple[ModelOutput, torch.Tensor]:
    """``(output, loss)`` of the step's batch without dropout noise.

    When the step's own forward ran without active dropout (e.g. Alg. 2, where the model's dropout is off) that pass
    is reused; otherwise (e.g. Alg. 4, whose objective is Dropout_k) one extra forward runs with every dropout block
    paused and is cached in ``ctx.extras`` for the other regularisers of the step.
    """
    if _KEY in ctx.extras:
        return ctx.extras[_KEY]
    model = ctx.model
    if ctx.output is not None and ctx.loss is not None and not dropout_active(model):
        result = (ctx.output, ctx.loss)
    else:
        with dropout_disabled(model):
            output = model(ctx.batch)
        result = (output, cast("LossModel", model).loss(ctx.batch, output))
    ctx.extras[_KEY] = result
    return result


def clean_probs(ctx: StepContext, logits: torch.Tensor) -> torch.Tensor:
    """``softmax`` of the clean pass's ``logits`` as ``(N, C)`` rows, in the graph, computed once per step.

    Shared by R_approx (label draws and ``D l_{y_hat}``) and xi_approx (``D l_y``) in Alg. 2, so the ``N x C``
    softmax and its backward run once.
    """
    key = f"{_KEY}.probs.{id(logits)}"
    if key not in ctx.extras:
        ctx.extras[key] = torch.softmax(logits.reshape(-1, logits.shape[-1]), dim=-1)
    return ctx.extras[key]

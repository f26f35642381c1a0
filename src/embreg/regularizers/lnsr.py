"""Layer-wise noise stability regularisation (LNSR): keep every layer above ``b`` stable under input noise.

lnsr-noise-stability-bert.txt, eq. 2 and Algorithm 1: with ``x^b`` the input of layer ``b`` and
``f^{b,r}`` the layers ``b..r``,

    R(theta) = sum_{r=b}^{L} lambda_r || f^{b,r}(x^b + eps) - f^{b,r}(x^b) ||^2,    eps_i ~ N(0, sigma^2).

The clean terms ``f^{b,r}(x^b)`` are the states ``h_r`` the step's forward pass already computed; the penalty
runs layers ``b..L`` once more on ``x^b + eps`` through the model's :class:`~embreg.regularizers.layer_stack.
LayerStack`. Gradients flow through both terms (and through ``x^b`` into the layers below ``b``), as in the paper.

Dropout. In training mode the noisy pass replays the dropout masks the clean pass drew in layers ``b..L``
(:class:`~embreg.regularizers.layer_stack.DropoutReplay`, hooked by :meth:`LNSR.prepare`), so the penalty measures
the effect of ``eps`` alone on the same sub-network, and ``sigma -> 0`` sends it to 0. ``replay_dropout=False``
draws fresh masks instead (the penalty then also counts the dropout noise between the two passes).

Cost: one extra forward and backward through layers ``b..L`` (about ``(L - b + 1) / L`` of a plain step's encoder
work); no extra parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.registry import register
from embreg.regularizers._checks import check_number, check_positive_int
from embreg.regularizers.base import StepContext
from embreg.regularizers.layer_stack import DropoutReplay, LayerStack, check_layer_index, layer_stack

__all__ = ["LNSR", "noise_stability_terms"]


def noise_stability_terms(
    noisy: Sequence[torch.Tensor],
    clean: Sequence[torch.Tensor],
    attention_mask: torch.Tensor | None = None,
    reduction: Literal["mean", "sum"] = "mean",
) -> torch.Tensor:
    """``|| noisy_r - clean_r ||^2`` per layer ``r``, averaged over the batch.

    Args:
        noisy, clean: the per-layer states of the two passes, each ``(B, T, D)`` (or ``(B, D)``).
        attention_mask: ``(B, T')`` with ``T' >= T``; padding positions are left out.
        reduction: ``"sum"``: the squared L2 norm of each example's whole state (eq. 2 as written);
            ``"mean"``: that norm divided by the number of entries it sums (valid tokens x D), which does not
            grow with text length or width.

    Returns:
        ``(R,)``: one value per layer.

    Example:
        >>> noisy, clean = [torch.ones(2, 3, 4)], [torch.zeros(2, 3, 4)]
        >>> noise_stability_terms(noisy, clean, reduction="sum").tolist()
        [12.0]
        >>> noise_stability_terms(noisy, clean, torch.tensor([[1, 1, 0], [1, 0, 0]])).tolist()
        [1.0]
    """
    if reduction not in ("mean", "sum"):
        raise ConfigError(f"reduction={reduction!r} must be 'mean' or 'sum'")
    terms = []
    for a, b in zip(noisy, clean, strict=True):
        squared = (a - b).pow(2)
        if squared.dim() == 3:
            squared = squared.sum(dim=-1)  # (B, T)
            if attention_mask is not None:
                weights = attention_mask[:, : squared.shape[1]].to(squared.dtype)
                per_example = (squared * weights).sum(dim=1)
                count = weights.sum(dim=1).clamp(min=1.0) * a.shape[-1]
            else:
                per_example = squared.sum(dim=1)
                count = torch.full_like(per_example, float(a.shape[1] * a.shape[-1]))
        else:
            per_example = squared.reshape(squared.shape[0], -1).sum(dim=1)
            count = torch.full_like(per_example, float(a[0].numel()))
        terms.append((per_example / count if reduction == "mean" else per_example).mean())
    return torch.stack(terms)


class LNSR:
    """Layer-wise noise stability regulariser (paper eq. 2, Alg. 1) as a ``prepare`` + ``penalty`` hook pair.

    Args:
        sigma: standard deviation of the Gaussian noise added to ``x^b`` (>= 0; 0 adds exactly nothing).
        start_layer: ``b``, the layer whose input is perturbed, in ``[1, L]`` (paper: 1, the first layer).
        weights: ``lambda_r`` for ``r = b..L``: one number for every layer (paper: 1 on all layers) or a list of
            ``L - b + 1`` numbers, each >= 0.
        reduction: how one state's squared difference is summed, see :func:`noise_stability_terms`.
        replay_dropout: the noisy pass reuses the clean pass's dropout masks (see the module docstring).

    Example:
        >>> from embreg.regularizers.layer_stack import SequentialStack
        >>> class Tiny(nn.Module):
        ...     def __init__(self):
        ...         super().__init__(); self.blocks = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3)])
        ...     def layer_stack(self):
        ...         return SequentialStack(self.blocks)
        ...     def forward(self, batch):
        ...         from embreg.models.hidden_states import hidden_states_dict
        ...         states = [batch["x"]]
        ...         for block in self.blocks:
        ...             states.append(block(states[-1]))
        ...         return ModelOutput(states[-1], hidden_states_dict(states))
        >>> from embreg.models.output import ModelOutput
        >>> model, lnsr = Tiny(), LNSR(sigma=0.1)
        >>> model = lnsr.prepare(model)
        >>> batch = {"x": torch.randn(4, 3)}
        >>> ctx = StepContext(model, batch, output=model(batch))
        >>> bool(lnsr.penalty(ctx) > 0)
        True
    """

    def __init__(
        self,
        sigma: float = 0.1,
        start_layer: int = 1,
        weights: float | Sequence[float] = 1.0,
        *,
        reduction: Literal["mean", "sum"] = "mean",
        replay_dropout: bool = True,
    ) -> None:
        self.sigma = check_number(sigma, "sigma")
        self.start_layer = check_positive_int(start_layer, "start_layer")
        if isinstance(weights, (int, float)) and not isinstance(weights, bool):
            self.weights: float | list[float] = check_number(weights, "weights")
        elif isinstance(weights, bool):
            raise ConfigError(f"weights={weights!r} must be a number or a list of numbers")
        else:
            self.weights = [check_number(w, f"weights[{i}]") for i, w in enumerate(weights)]
            if not self.weights:
                raise ConfigError("weights is an empty list; give one number or one per layer b..L")
        if reduction not in ("mean", "sum"):
            raise ConfigError(f"reduction={reduction!r} must be 'mean' or 'sum'")
        self.reduction = reduction
        self.replay_dropout = replay_dropout
        self._replay = DropoutReplay()
        self.last_terms: torch.Tensor | None = None
        """The unweighted per-layer terms of the last penalty, ``(L - b + 1,)``, detached (for logging)."""

    def _stack(self, model: nn.Module) -> LayerStack:
        stack = layer_stack(model)
        check_layer_index(self.start_layer, stack.num_layers, "start_layer")
        self.layer_weights(stack.num_layers)
        return stack

    def layer_weights(self, num_layers: int) -> torch.Tensor:
        """``lambda_b..lambda_L`` for a model with ``num_layers`` layers, ``(L - b + 1,)``."""
        count = num_layers - self.start_layer + 1
        if isinstance(self.weights, float):
            return torch.full((count,), self.weights)
        if len(self.weights) != count:
            raise ConfigError(
                f"weights has {len(self.weights)} entries; layers {self.start_layer}..{num_layers} need {count}"
            )
        return torch.tensor(self.weights)

    def prepare(self, model: nn.Module) -> nn.Module:
        """Checks that the model has a layer stack with layer ``b`` and hooks it for the dropout replay."""
        stack = self._stack(model)
        if self.replay_dropout:
            self._replay.attach(stack.layer(self.start_layer))
        return model

    def _is_zero(self) -> bool:
        weights = [self.weights] if isinstance(self.weights, float) else self.weights
        return self.sigma == 0.0 or all(w == 0.0 for w in weights)

    def penalty(self, ctx: StepContext) -> torch.Tensor:
        """``sum_r lambda_r ||f^{b,r}(x^b + eps) - f^{b,r}(x^b)||^2`` for the step's batch (a scalar).

        Raises:
            ConfigError: the model has no layer stack or returned no hidden states, ``b`` is out of range, or
                ``replay_dropout`` is on and :meth:`prepare` was not called on this model.
        """
        if ctx.output is None:
            raise ConfigError("LNSR.penalty needs the step's forward output (ctx.output) with its hidden states")
        if self._is_zero():
            return ctx.output.predictions.new_zeros(())
        stack = self._stack(ctx.model)
        clean = stack.clean_states(ctx.output)
        start = self.start_layer
        x = clean[start - 1]
        noisy_input = x + torch.randn_like(x) * self.sigma
        if self.replay_dropout and ctx.model.training:
            if not self._replay.attached:
                raise ConfigError(
                    "LNSR(replay_dropout=True) needs prepare(model) before training (embreg's Trainer "
                    "and HF adapter call it); or pass replay_dropout=False"
                )
            with self._replay.replaying(x):
                noisy = stack.run(noisy_input, ctx.batch, start)
        else:
            noisy = stack.run(noisy_input, ctx.batch, start)
        terms = noise_stability_terms(noisy, clean[start:], ctx.batch.get("attention_mask"), self.reduction)
        self.last_terms = terms.detach()
        return (self.layer_weights(stack.num_layers).to(terms) * terms).sum()


@dataclass
class LNSRConfig:
    """``regularizers: [{name: lnsr, sigma: 0.1, start_layer: 3, weights: 1.0}]`` (see :class:`LNSR`)."""

    sigma: float = 0.1
    start_layer: int = 1
    weights: float | list[float] = 1.0
    reduction: Literal["mean", "sum"] = "mean"
    replay_dropout: bool = True

    def __post_init__(self) -> None:
        build_lnsr(self, None)  # the class checks every argument: a bad value fails when the recipe loads


@register(
    "regularizer",
    "lnsr",
    config=LNSRConfig,
    requires=("layer_stack",),
    summary="LNSR: Gaussian noise at layer b's input, penalise the change of every later layer's output",
    reference="lnsr-noise-stability-bert.txt, eq. 6-7 (Sec. 3.2)",
)
def build_lnsr(config: LNSRConfig, context: Any) -> LNSR:
    return LNSR(
        config.sigma,
        config.start_layer,
        config.weights,
        reduction=config.reduction,
        replay_dropout=config.replay_dropout,
    )

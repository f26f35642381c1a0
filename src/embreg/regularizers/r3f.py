"""R3F: keep the predictions unchanged under small random noise on the embeddings (no adversarial search).

lnsr-noise-stability-bert.txt, Sec. 5.4 (after Aghajanyan et al., 2020): with ``x = h_0`` the embedding output
and ``z ~ N(0, sigma^2 I)`` (or uniform on ``[-sigma, sigma]``),

    R(theta) = lambda * KL_sym(f(x) || f(x + z)),

the symmetric KL divergence of the two predicted class distributions (squared error for regression). Gradients
flow into both predictions.

Cost: one extra forward and backward through all layers: about 2x a plain step. Under bf16/fp16 autocast both
predictions are computed again in float32 (:mod:`embreg.regularizers.noise_precision`), one pass more.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.registry import register
from embreg.regularizers._checks import check_number
from embreg.regularizers.base import StepContext
from embreg.regularizers.divergence import DivergenceKind, prediction_divergence, stack_divergence
from embreg.regularizers.layer_stack import DropoutReplay, layer_stack
from embreg.regularizers.noise_precision import float32_passes

__all__ = ["R3F"]


class R3F:
    """The R3F penalty as a ``prepare`` + ``penalty`` hook pair.

    Args:
        weight: ``lambda`` (>= 0).
        sigma: noise scale (>= 0): the standard deviation (``noise="normal"``) or half-width (``"uniform"``).
        noise: ``"normal"`` or ``"uniform"``.
        divergence: ``"auto"`` (symmetric KL for logits, squared error for regression), ``"sym_kl"`` or ``"mse"``.
        replay_dropout: reuse the clean pass's dropout masks in the noisy pass (R3F draws fresh ones, the default).

    Example:
        >>> R3F(weight=1.0, sigma=1e-5).noise
        'normal'
    """

    def __init__(
        self,
        weight: float = 1.0,
        sigma: float = 1e-5,
        *,
        noise: Literal["normal", "uniform"] = "normal",
        divergence: DivergenceKind = "auto",
        replay_dropout: bool = False,
    ) -> None:
        self.weight = check_number(weight, "weight")
        self.sigma = check_number(sigma, "sigma")
        if noise not in ("normal", "uniform"):
            raise ConfigError(f"noise={noise!r} must be 'normal' or 'uniform'")
        if divergence not in ("auto", "sym_kl", "mse"):
            raise ConfigError(f"divergence={divergence!r} must be 'auto', 'sym_kl' or 'mse'")
        self.noise = noise
        self.divergence = divergence
        self.replay_dropout = replay_dropout
        self._replay = DropoutReplay()

    def prepare(self, model: nn.Module) -> nn.Module:
        """Checks that the model has a layer stack; hooks layer 1 for the dropout replay."""
        stack = layer_stack(model)
        stack_divergence(self.divergence, stack)  # a divergence the predictions cannot take fails before training
        if self.replay_dropout:
            self._replay.attach(stack.layer(1))
        return model

    def sample_noise(self, x: torch.Tensor) -> torch.Tensor:
        """Noise of ``x``'s shape: ``N(0, sigma^2)`` or ``U(-sigma, sigma)`` entry-wise."""
        if self.noise == "normal":
            return torch.randn_like(x) * self.sigma
        return (torch.rand_like(x) * 2.0 - 1.0) * self.sigma

    def penalty(self, ctx: StepContext) -> torch.Tensor:
        """``lambda * divergence(f(x + z), f(x))`` for the step's batch (a scalar)."""
        if ctx.output is None:
            raise ConfigError("R3F.penalty needs the step's forward output (ctx.output) with its hidden states")
        if self.weight == 0.0:
            return ctx.output.predictions.new_zeros(())
        stack = layer_stack(ctx.model)
        x, clean = stack.clean_states(ctx.output)[0], ctx.output.predictions
        replay = self.replay_dropout and ctx.model.training
        if replay and not self._replay.attached:
            raise ConfigError("R3F(replay_dropout=True) needs prepare(model) before training")

        def predict(inputs: torch.Tensor) -> torch.Tensor:
            with self._replay.replaying(x) if replay else contextlib.nullcontext():
                return stack.predict(stack.run(inputs, ctx.batch, 1)[-1], ctx.batch)

        with float32_passes(x) as recompute:
            if recompute:  # under autocast the noise is below the precision: both passes in float32
                x32 = x.float()
                clean, noisy = predict(x32), predict(x32 + self.sample_noise(x32))
            else:
                noisy = predict(x + self.sample_noise(x))
        return self.weight * prediction_divergence(noisy, clean, stack_divergence(self.divergence, stack))


@dataclass
class R3FConfig:
    """``regularizers: [{name: r3f, weight: 1.0, sigma: 1.0e-5}]`` (see :class:`R3F` for each argument)."""

    weight: float = 1.0
    sigma: float = 1e-5
    noise: Literal["normal", "uniform"] = "normal"
    divergence: Literal["auto", "sym_kl", "mse"] = "auto"
    replay_dropout: bool = False

    def __post_init__(self) -> None:
        build_r3f(self, None)  # the class checks every argument: a bad value fails when the recipe loads


@register(
    "regularizer",
    "r3f",
    config=R3FConfig,
    requires=("layer_stack",),
    summary="R3F: predictions kept stable under random noise on the embedding output (2x a step)",
    reference="lnsr-noise-stability-bert.txt, Sec. 5.4 (Aghajanyan et al., 2020)",
)
def build_r3f(config: R3FConfig, context: Any) -> R3F:
    return R3F(
        config.weight,
        config.sigma,
        noise=config.noise,
        divergence=config.divergence,
        replay_dropout=config.replay_dropout,
    )

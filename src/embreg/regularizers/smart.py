"""SMART: smoothness-inducing adversarial regularisation, with an optional Bregman proximal point term.

lnsr-noise-stability-bert.txt, Sec. 4.2 and 5.4 (after Jiang et al., 2020). With ``x = h_0`` the embedding
output (the input of layer 1) and ``f`` the rest of the model,

    R_s(theta) = lambda_s * max_{||delta|| <= epsilon} l_s(f(x + delta), f(x)),

``l_s`` the symmetric KL divergence of the predicted class distributions (squared error for regression). The
maximum is approximated by projected gradient ascent: ``delta`` starts at ``N(0, init_std^2)``, then ``steps``
times ``delta <- Proj_epsilon(delta + step_size * g / ||g||)`` with ``g`` the gradient of ``l_s`` with respect
to ``delta`` (the clean prediction held fixed), the norm taken per token (``norm="inf"``: max-abs, ``"l2"``:
Euclidean). ``Proj`` clips to the epsilon-ball of the same norm, so ``delta`` never leaves it.

The optional Bregman proximal point term (``bregman_weight > 0``) adds
``mu * l_s(f(x; theta), f(x; theta_tilde))`` with ``theta_tilde`` an exponential moving average of past
parameters (momentum ``bregman_momentum``), keeping each update close to where the model has been.

Cost: per ascent step one forward and backward (input gradients only) through the layers, then one forward and
backward for the penalty: about 3x a plain step with ``steps=1``; the Bregman term adds one forward without
gradients. Under bf16/fp16 autocast the clean prediction is computed again in float32 and every pass of the
adversarial term runs in float32 (:mod:`embreg.regularizers.noise_precision`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.registry import register
from embreg.regularizers._checks import check_number, check_positive_int
from embreg.regularizers.base import StepContext
from embreg.regularizers.divergence import DivergenceKind, prediction_divergence, stack_divergence
from embreg.regularizers.layer_stack import DropoutReplay, LayerStack, layer_stack
from embreg.regularizers.noise_precision import float32_passes

__all__ = ["SMART", "project_to_ball", "normalize_per_token"]


def normalize_per_token(g: torch.Tensor, norm: Literal["inf", "l2"], eps: float = 1e-12) -> torch.Tensor:
    """``g`` divided by its norm over the last dimension (each token's vector), ``(..., D)``.

    Example:
        >>> normalize_per_token(torch.tensor([[3.0, -4.0]]), "l2").tolist()
        [[0.6000000238418579, -0.800000011920929]]
    """
    size = g.abs().amax(dim=-1, keepdim=True) if norm == "inf" else g.norm(dim=-1, keepdim=True)
    return g / (size + eps)


def project_to_ball(delta: torch.Tensor, epsilon: float, norm: Literal["inf", "l2"]) -> torch.Tensor:
    """The closest point to ``delta`` with each token's vector inside the ``epsilon``-ball of ``norm``.

    Example:
        >>> project_to_ball(torch.tensor([[0.3, -2.0]]), 1.0, "inf").tolist()
        [[0.30000001192092896, -1.0]]
        >>> project_to_ball(torch.tensor([[3.0, 4.0]]), 1.0, "l2").tolist()
        [[0.6000000238418579, 0.800000011920929]]
    """
    if norm == "inf":
        return delta.clamp(-epsilon, epsilon)
    size = delta.norm(dim=-1, keepdim=True)
    return delta * (epsilon / size.clamp(min=epsilon))


class SMART:
    """Smoothness-inducing adversarial regulariser as a ``prepare`` + ``penalty`` hook pair.

    Args:
        weight: ``lambda_s`` (>= 0).
        epsilon: radius of the perturbation ball (> 0).
        step_size: ascent step ``eta`` (> 0).
        init_std: standard deviation of the initial perturbation (>= 0).
        steps: ascent steps (>= 1; SMART uses 1).
        norm: ``"inf"`` or ``"l2"``, per token, for the normalisation and the ball.
        divergence: ``"auto"`` (symmetric KL for logits, squared error for regression), ``"sym_kl"`` or ``"mse"``.
        bregman_weight: ``mu`` of the Bregman proximal point term (0: off).
        bregman_momentum: EMA momentum ``beta`` of ``theta_tilde`` in ``[0, 1)``.
        replay_dropout: reuse the clean pass's dropout masks in the perturbed passes (SMART itself draws fresh
            masks, the default).

    Example:
        >>> smart = SMART(weight=1.0, epsilon=1e-3)
        >>> smart.epsilon, smart.steps
        (0.001, 1)
    """

    def __init__(
        self,
        weight: float = 1.0,
        epsilon: float = 1e-5,
        step_size: float = 1e-3,
        init_std: float = 1e-5,
        steps: int = 1,
        *,
        norm: Literal["inf", "l2"] = "inf",
        divergence: DivergenceKind = "auto",
        bregman_weight: float = 0.0,
        bregman_momentum: float = 0.99,
        replay_dropout: bool = False,
    ) -> None:
        self.weight = check_number(weight, "weight")
        self.epsilon = check_number(epsilon, "epsilon", low_open=True)
        self.step_size = check_number(step_size, "step_size", low_open=True)
        self.init_std = check_number(init_std, "init_std")
        self.steps = check_positive_int(steps, "steps")
        if norm not in ("inf", "l2"):
            raise ConfigError(f"norm={norm!r} must be 'inf' or 'l2'")
        if divergence not in ("auto", "sym_kl", "mse"):
            raise ConfigError(f"divergence={divergence!r} must be 'auto', 'sym_kl' or 'mse'")
        self.norm = norm
        self.divergence = divergence
        self._divergence: DivergenceKind = divergence  # as the model's layer stack resolves it (stack_divergence)
        self.bregman_weight = check_number(bregman_weight, "bregman_weight")
        self.bregman_momentum = check_number(bregman_momentum, "bregman_momentum", high=1.0)
        self.replay_dropout = replay_dropout
        self._replay = DropoutReplay()
        self._ema: dict[str, torch.Tensor] | None = None
        self.last_delta: torch.Tensor | None = None
        """The final perturbation of the last penalty, detached (e.g. to check it stays in the ball)."""

    def prepare(self, model: nn.Module) -> nn.Module:
        """Checks the model has a layer stack; hooks layer 1 for the dropout replay; starts the EMA."""
        stack = layer_stack(model)
        self._divergence = stack_divergence(self.divergence, stack)
        if self.replay_dropout:
            self._replay.attach(stack.layer(1))
        if self.bregman_weight > 0:
            self._ema = {name: p.detach().clone() for name, p in model.named_parameters()}
        return model

    def _predict(
        self, stack: LayerStack, x: torch.Tensor, batch: dict, training: bool, key: torch.Tensor
    ) -> torch.Tensor:
        if self.replay_dropout and training:
            with self._replay.replaying(key):
                return stack.predict(stack.run(x, batch, 1)[-1], batch)
        return stack.predict(stack.run(x, batch, 1)[-1], batch)

    def perturbation(
        self, stack: LayerStack, x: torch.Tensor, clean: torch.Tensor, batch: dict, training: bool
    ) -> torch.Tensor:
        """The adversarial ``delta`` (same shape as ``x``, inside the epsilon-ball), found without parameter grads."""
        delta = torch.randn_like(x) * self.init_std
        delta = project_to_ball(delta, self.epsilon, self.norm)
        base, target = x.detach(), clean.detach()
        for _ in range(self.steps):
            with torch.enable_grad():  # the ascent needs input gradients even if the caller disabled them
                delta.requires_grad_(True)
                loss = prediction_divergence(
                    self._predict(stack, base + delta, batch, training, x), target, self._divergence
                )
                (grad,) = torch.autograd.grad(loss, delta)
            delta = project_to_ball(
                delta.detach() + self.step_size * normalize_per_token(grad, self.norm), self.epsilon, self.norm
            )
        return delta.detach()

    def penalty(self, ctx: StepContext) -> torch.Tensor:
        """``lambda_s l_s(f(x + delta*), f(x))`` (+ the Bregman term) for the step's batch (a scalar)."""
        if ctx.output is None:
            raise ConfigError("SMART.penalty needs the step's forward output (ctx.output) with its hidden states")
        if self.weight == 0.0 and self.bregman_weight == 0.0:
            return ctx.output.predictions.new_zeros(())
        stack = layer_stack(ctx.model)
        self._divergence = stack_divergence(self.divergence, stack)
        if self.replay_dropout and ctx.model.training and not self._replay.attached:
            raise ConfigError("SMART(replay_dropout=True) needs prepare(model) before training")
        x, clean = stack.clean_states(ctx.output)[0], ctx.output.predictions
        total = clean.new_zeros((), dtype=torch.float32)
        if self.weight > 0:
            training = ctx.model.training
            with float32_passes(x) as recompute:
                inputs, reference = x, clean
                if recompute:  # under autocast delta is below the precision: every pass of the term in float32
                    inputs = x.float()
                    reference = self._predict(stack, inputs, ctx.batch, training, x)
                delta = self.perturbation(stack, inputs, reference, ctx.batch, training)
                self.last_delta = delta
                adversarial = self._predict(stack, inputs + delta, ctx.batch, training, x)
                total = total + self.weight * prediction_divergence(adversarial, reference, self._divergence)
        if self.bregman_weight > 0:
            total = total + self.bregman_weight * self._bregman(ctx, clean)
        return total

    @torch.no_grad()
    def _update_ema(self, model: nn.Module) -> None:
        assert self._ema is not None
        for name, param in model.named_parameters():
            self._ema[name].mul_(self.bregman_momentum).add_(param.detach(), alpha=1.0 - self.bregman_momentum)

    def _bregman(self, ctx: StepContext, clean: torch.Tensor) -> torch.Tensor:
        """``l_s(f(x; theta), f(x; theta_tilde))``, then ``theta_tilde <- beta theta_tilde + (1 - beta) theta``."""
        if self._ema is None:
            raise ConfigError("SMART(bregman_weight > 0) needs prepare(model) before training")
        model = ctx.model
        predict = ctx.extras.get("predict") or (lambda m: m(ctx.batch).predictions)
        with torch.no_grad(), _parameters_swapped(model, self._ema):
            anchor = predict(model)
        self._update_ema(model)
        return prediction_divergence(clean, anchor.detach(), self._divergence)


@contextlib.contextmanager
def _parameters_swapped(model: nn.Module, values: dict[str, torch.Tensor]) -> Iterator[None]:
    """Within the block the model's parameters hold ``values`` (same names); afterwards their own data again."""
    saved = {}
    try:
        for name, param in model.named_parameters():
            value = values[name]
            if value.device != param.device:
                value = values[name] = value.to(param.device)
            saved[name] = param.data
            param.data = value
        yield
    finally:
        for name, param in model.named_parameters():
            if name in saved:
                param.data = saved[name]


@dataclass
class SMARTConfig:
    """``regularizers: [{name: smart, weight: 1.0, epsilon: 1.0e-5}]`` (see :class:`SMART` for each argument)."""

    weight: float = 1.0
    epsilon: float = 1e-5
    step_size: float = 1e-3
    init_std: float = 1e-5
    steps: int = 1
    norm: Literal["inf", "l2"] = "inf"
    divergence: Literal["auto", "sym_kl", "mse"] = "auto"
    bregman_weight: float = 0.0
    bregman_momentum: float = 0.99
    replay_dropout: bool = False

    def __post_init__(self) -> None:
        build_smart(self, None)  # the class checks every argument: a bad value fails when the recipe loads


@register(
    "regularizer",
    "smart",
    config=SMARTConfig,
    requires=("layer_stack",),
    summary="SMART: adversarial smoothness of the predictions around the embedding output (+ Bregman)",
    reference="lnsr-noise-stability-bert.txt, Sec. 5.4 (Jiang et al., 2020)",
)
def build_smart(config: SMARTConfig, context: Any) -> SMART:
    return SMART(
        config.weight,
        config.epsilon,
        config.step_size,
        config.init_std,
        config.steps,
        norm=config.norm,
        divergence=config.divergence,
        bregman_weight=config.bregman_weight,
        bregman_momentum=config.bregman_momentum,
        replay_dropout=config.replay_dropout,
    )

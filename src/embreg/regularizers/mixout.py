"""Mixout: at each training step, swap each weight for its pretrained value with probability ``p``.

lnsr-noise-stability-bert.txt, Sec. 4.2 (after Lee et al., 2020). With target weights ``u`` (the pretrained
values, kept as a buffer) and a fresh Bernoulli mask ``M`` (``M_ij = 1`` with probability ``p``), a layer uses

    W_mix = ((1 - M) * W + M * u - p * u) / (1 - p),

whose expectation over ``M`` is ``W``: the rescaling keeps the expected output of the layer, as inverted dropout
does. In evaluation mode (and at ``p = 0``) the layer uses ``W`` itself, i.e. the expected mixture. Gradients
reach only the entries of ``W`` that were kept. Biases are not mixed.

:class:`Mixout` replaces chosen ``nn.Linear`` layers of *any* model by :class:`MixoutLinear` in its ``prepare``
hook, keeping the same weight and bias parameters (so optimizers and checkpoints see the same names, plus the
``target`` buffer).

Cost: one Bernoulli mask and two element-wise passes over each mixed weight matrix per training forward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import ConfigError
from embreg.registry import register
from embreg.regularizers._checks import check_number

__all__ = ["Mixout", "MixoutLinear", "mixout_weight"]


def mixout_weight(
    weight: torch.Tensor, target: torch.Tensor, p: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``((1 - M) W + M u - p u) / (1 - p)`` with ``M ~ Bernoulli(p)`` entry-wise (Lee et al., 2020, eq. for mixout).

    Args:
        weight: ``W``, any shape.
        target: ``u``, the same shape.
        p: mixing probability in ``[0, 1)``.
        generator: optional generator for the mask (default: torch's global one).

    Example:
        >>> w, u = torch.ones(2, 2), torch.zeros(2, 2)
        >>> torch.equal(mixout_weight(w, u, 0.0), w)
        True
    """
    if p == 0.0:
        return weight
    mask = torch.empty_like(weight).bernoulli_(p, generator=generator)
    return (weight * (1.0 - mask) + target * (mask - p)) / (1.0 - p)


class MixoutLinear(nn.Linear):
    """A linear layer whose weight is mixed with a fixed target during training (see :func:`mixout_weight`).

    Args:
        in_features, out_features, bias: as for ``nn.Linear``.
        p: mixing probability in ``[0, 1)``.

    Shapes: ``(..., in_features) -> (..., out_features)``.

    Example:
        >>> layer = MixoutLinear.from_linear(nn.Linear(3, 2), p=0.5)
        >>> layer(torch.ones(4, 3)).shape
        torch.Size([4, 2])
    """

    target: torch.Tensor  # a buffer, registered in __init__ / from_linear

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        p: float = 0.1,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.p = check_number(p, "p", high=1.0)
        self.register_buffer("target", self.weight.detach().clone())

    @classmethod
    def from_linear(cls, linear: nn.Linear, p: float, target: torch.Tensor | None = None) -> MixoutLinear:
        """A :class:`MixoutLinear` that reuses ``linear``'s parameters; target = ``linear.weight`` now (default)."""
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer.in_features, layer.out_features = linear.in_features, linear.out_features
        layer.weight = linear.weight
        layer.bias = linear.bias
        layer.p = check_number(p, "p", high=1.0)
        chosen = linear.weight.detach().clone() if target is None else target.detach().clone()
        if chosen.shape != linear.weight.shape:
            raise ConfigError(f"target has shape {tuple(chosen.shape)}; the weight has {tuple(linear.weight.shape)}")
        layer.register_buffer("target", chosen)
        layer.train(linear.training)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return F.linear(x, self.weight, self.bias)
        return F.linear(x, mixout_weight(self.weight, self.target, self.p), self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, p={self.p}"


class Mixout:
    """Turns chosen ``nn.Linear`` layers of a model into :class:`MixoutLinear` (a ``prepare`` hook).

    Args:
        p: mixing probability in ``[0, 1)`` (Lee et al. use up to 0.9).
        include: which linear layers: ``None`` (all), a module-name prefix, or ``(name, module) -> bool``.
            The target of each is its weight when ``prepare`` runs: the pretrained values for pretrained layers,
            the initial values for a new head.

    Example:
        >>> model = Mixout(p=0.3).prepare(nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1)))
        >>> [type(m).__name__ for m in model]
        ['MixoutLinear', 'ReLU', 'MixoutLinear']
    """

    def __init__(self, p: float = 0.1, include: str | Callable[[str, nn.Module], bool] | None = None) -> None:
        self.p = check_number(p, "p", high=1.0)
        self.include = include
        self.replaced: list[str] = []

    def _wanted(self, name: str, module: nn.Module) -> bool:
        if self.include is None:
            return True
        if isinstance(self.include, str):
            return name.startswith(self.include)
        return bool(self.include(name, module))

    def prepare(self, model: nn.Module) -> nn.Module:
        """Replaces the chosen linear layers in place and returns the model (or the new layer if it is one)."""
        if type(model) is nn.Linear and self._wanted("", model):
            self.replaced = [""]
            return MixoutLinear.from_linear(model, self.p)
        self.replaced = []
        for name, module in list(model.named_modules()):
            for child_name, child in list(module.named_children()):
                full = f"{name}.{child_name}" if name else child_name
                if type(child) is nn.Linear and self._wanted(full, child):
                    setattr(module, child_name, MixoutLinear.from_linear(child, self.p))
                    self.replaced.append(full)
        if not self.replaced:
            raise ConfigError(
                f"{type(model).__name__} has no nn.Linear layer matching include={self.include!r}; "
                "Mixout needs at least one"
            )
        return model


@dataclass
class MixoutConfig:
    """``regularizers: [{name: mixout, p: 0.1}]`` (see :class:`Mixout`; ``include``: a module-name prefix)."""

    p: float = 0.1
    include: str | None = None

    def __post_init__(self) -> None:
        build_mixout(self, None)  # the class checks every argument: a bad value fails when the recipe loads


@register(
    "regularizer",
    "mixout",
    config=MixoutConfig,
    requires=("linear_layers",),
    summary="Mixout: swap linear weights for their starting values with probability p",
    reference="lnsr-noise-stability-bert.txt, Sec. 5.4 (Lee et al., 2020)",
)
def build_mixout(config: MixoutConfig, context: Any) -> Mixout:
    return Mixout(config.p, include=config.include)

"""The "fine-tuning + noise" ablation of LNSR: Gaussian noise at the input of layer ``b``, no penalty.

lnsr-noise-stability-bert.txt, Sec. 5.1 and Table 2 ("FT+Noise"): noise is injected directly into a layer's
representation and the perturbed representation is propagated to compute the task loss, a representation-space
augmentation. :meth:`LayerNoise.prepare` hooks layer ``b`` so that in training mode its input ``x^b`` becomes
``x^b + eps`` with ``eps_i ~ N(0, sigma^2)``; evaluation is untouched.

Cost: one Gaussian draw of the size of ``x^b`` per step (no extra forward or backward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from embreg.registry import register
from embreg.regularizers._checks import check_number, check_positive_int
from embreg.regularizers.layer_stack import check_layer_index, layer_stack

__all__ = ["LayerNoise"]


class LayerNoise:
    """Adds ``N(0, sigma^2)`` noise to the input of layer ``b`` during training (the paper's FT+Noise).

    Args:
        sigma: noise standard deviation (>= 0).
        start_layer: ``b`` in ``[1, L]``.

    Example:
        >>> from embreg.regularizers.layer_stack import SequentialStack
        >>> class Tiny(nn.Module):
        ...     def __init__(self):
        ...         super().__init__(); self.blocks = nn.ModuleList([nn.Identity(), nn.Identity()])
        ...     def layer_stack(self):
        ...         return SequentialStack(self.blocks)
        ...     def forward(self, x):
        ...         return self.blocks[1](self.blocks[0](x))
        >>> model = LayerNoise(sigma=1.0, start_layer=2).prepare(Tiny())
        >>> x = torch.zeros(1000)
        >>> 0.9 < model(x).std().item() < 1.1, torch.equal(model.eval()(x), x)
        (True, True)
    """

    def __init__(self, sigma: float = 0.1, start_layer: int = 1) -> None:
        self.sigma = check_number(sigma, "sigma")
        self.start_layer = check_positive_int(start_layer, "start_layer")
        self._handle: Any = None

    def prepare(self, model: nn.Module) -> nn.Module:
        """Hooks layer ``b`` of the model's layer stack; raises ``ConfigError`` when ``b`` is out of range."""
        stack = layer_stack(model)
        check_layer_index(self.start_layer, stack.num_layers, "start_layer")
        self.remove()
        self._handle = stack.layer(self.start_layer).register_forward_pre_hook(self._add_noise, with_kwargs=True)
        return model

    def remove(self) -> None:
        """Takes the hook off again."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _add_noise(self, module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        if not module.training or self.sigma == 0.0:
            return None
        if args and isinstance(args[0], torch.Tensor):
            x = args[0]
            return (x + torch.randn_like(x) * self.sigma, *args[1:]), kwargs
        if isinstance(kwargs.get("hidden_states"), torch.Tensor):
            x = kwargs["hidden_states"]
            return args, {**kwargs, "hidden_states": x + torch.randn_like(x) * self.sigma}
        return None


@dataclass
class LayerNoiseConfig:
    """``regularizers: [{name: layer-noise, sigma: 0.1, start_layer: 1}]`` (see :class:`LayerNoise`)."""

    sigma: float = 0.1
    start_layer: int = 1

    def __post_init__(self) -> None:
        build_layer_noise(self, None)  # the class checks every argument: a bad value fails when the recipe loads


@register(
    "regularizer",
    "layer-noise",
    config=LayerNoiseConfig,
    requires=("layer_stack",),
    summary="FT+Noise: Gaussian noise added to layer b's input while training (no penalty)",
    reference="lnsr-noise-stability-bert.txt, Sec. 5.4 (FT+Noise baseline)",
)
def build_layer_noise(config: LayerNoiseConfig, context: Any) -> LayerNoise:
    return LayerNoise(config.sigma, config.start_layer)

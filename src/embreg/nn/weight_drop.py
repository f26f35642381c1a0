"""Weight drop (DropConnect) on chosen weights of a module, without touching private cuDNN internals.

Reference: dropout-explicit-implicit-regularization.txt, Sec. 5.1 ("DropConnect (Wan et al., 2013) on the weight
matrices") and nlp-best-practices.txt ("LSTM tricks"). The wrapped module keeps its ordinary parameters; at training
time :func:`torch.func.functional_call` runs it once with masked copies of the named weights, so gradients flow to
the raw parameters through the mask and no parameter is deleted or re-registered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from embreg.errors import EmbregError
from embreg.nn._checks import check_probability
from embreg.nn.dropout_control import DropoutBlock

__all__ = ["WeightDrop", "drop_connect"]


def drop_connect(
    weight: torch.Tensor, q: float, *, training: bool = True, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Zeroes each entry of ``weight`` with probability ``q`` and scales the rest by ``1 / (1 - q)``.

    Args:
        weight: any tensor (e.g. an LSTM's ``(4H, H)`` hidden-to-hidden matrix).
        q: drop probability in ``[0, 1)``.
        training: when False (or ``q == 0``) ``weight`` is returned as is.
        generator: optional torch generator.

    Example:
        >>> w = drop_connect(torch.ones(3, 3), 0.5)
        >>> sorted(set(w.flatten().tolist())) in ([0.0, 2.0], [0.0], [2.0])
        True
    """
    q = check_probability(q)
    if not training or q == 0.0:
        return weight
    keep = torch.full_like(weight, 1.0 - q)
    return weight * (torch.bernoulli(keep, generator=generator) / (1.0 - q))


class WeightDrop(DropoutBlock):
    """Runs ``module`` with DropConnect on the parameters named in ``weights`` (one mask per forward call).

    Args:
        module: the module to wrap, e.g. ``nn.LSTM(...)``.
        weights: names of parameters of ``module`` to drop, e.g. ``["weight_hh_l0"]``.
        q: drop probability in ``[0, 1)``.

    Example:
        >>> lstm = WeightDrop(nn.LSTM(4, 6, batch_first=True), ["weight_hh_l0"], q=0.5)
        >>> out, (h, c) = lstm(torch.randn(2, 5, 4))
        >>> out.shape
        torch.Size([2, 5, 6])
    """

    def __init__(self, module: nn.Module, weights: Sequence[str], q: float) -> None:
        super().__init__(q)
        names = dict(module.named_parameters())
        unknown = [w for w in weights if w not in names]
        if not weights or unknown:
            raise EmbregError(f"weights={list(weights)} must name parameters of the module; it has {sorted(names)}")
        self.module = module
        self.weights = list(weights)

    def dropped_weights(self) -> dict[str, torch.Tensor]:
        """Fresh DropConnect copies of the named weights (the raw parameters when not :attr:`active`)."""
        params = dict(self.module.named_parameters())
        return {name: drop_connect(params[name], self.q, training=self.active) for name in self.weights}

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if not self.active:
            return self.module(*args, **kwargs)
        return functional_call(self.module, self.dropped_weights(), args, kwargs)

"""L2-SP: pull the pretrained weights back towards their starting point, plain L2 on the new ones.

lnsr-noise-stability-bert.txt, Sec. 4.2 (after Li et al., 2018):

    Omega(w) = alpha / 2 * || w_s - w_s^0 ||^2 + beta / 2 * || w_new ||^2,

where ``w_s`` are the parameters that came from the pretrained model (``w_s^0`` their values when
:meth:`L2SP.prepare` runs, i.e. before fine-tuning) and ``w_new`` the task-specific ones (the new head).

Cost: one pass over the parameters (a subtraction and a squared norm each); no extra forward or backward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.registry import register
from embreg.regularizers._checks import check_number
from embreg.regularizers.base import StepContext

__all__ = ["L2SP", "pretrained_prefixes"]


def pretrained_prefixes(model: nn.Module) -> tuple[str, ...]:
    """Name prefixes of a model's pretrained part: ``"encoder."`` for embreg's EncoderClassifier, the
    ``base_model_prefix`` of a Hugging Face model (``"bert."``), else a :class:`ConfigError`.

    Example:
        >>> pretrained_prefixes(nn.Linear(2, 2))
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: cannot tell which parameters of Linear are pretrained: pass shared='<name prefix>' (e.g. 'encoder.')
    """
    if isinstance(getattr(model, "encoder", None), nn.Module) and hasattr(model, "predict_from_hidden"):
        return ("encoder.",)
    prefix = getattr(model, "base_model_prefix", "")
    if prefix and isinstance(getattr(model, prefix, None), nn.Module):
        return (prefix + ".",)
    raise ConfigError(
        f"cannot tell which parameters of {type(model).__name__} are pretrained: pass "
        "shared='<name prefix>' (e.g. 'encoder.')"
    )


class L2SP:
    """The L2-SP penalty (paper Sec. 4.2) as a ``prepare`` + ``penalty`` hook pair.

    Args:
        alpha: weight of the pull towards the pretrained values (>= 0).
        beta: weight of the L2 penalty on the new parameters (>= 0).
        shared: which parameters are pretrained: a name prefix, several, or a predicate on the name
            (``None``: :func:`pretrained_prefixes`).

    Example:
        >>> model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
        >>> reg = L2SP(alpha=1.0, beta=0.0, shared="0.")
        >>> model = reg.prepare(model)
        >>> reg.penalty(StepContext(model, {})).item()
        0.0
        >>> with torch.no_grad():
        ...     _ = model[0].weight.add_(1.0)
        >>> reg.penalty(StepContext(model, {})).item()  # alpha / 2 * 4 entries * 1^2
        2.0
    """

    def __init__(
        self,
        alpha: float = 0.01,
        beta: float = 0.0,
        *,
        shared: str | Sequence[str] | Callable[[str], bool] | None = None,
    ) -> None:
        self.alpha = check_number(alpha, "alpha")
        self.beta = check_number(beta, "beta")
        self.shared = shared
        self._anchored: list[tuple[nn.Parameter, torch.Tensor]] = []
        self._new: list[nn.Parameter] = []
        self.shared_names: list[str] = []

    def _is_shared(self, model: nn.Module) -> Callable[[str], bool]:
        if callable(self.shared):
            return self.shared
        prefixes = (
            pretrained_prefixes(model)
            if self.shared is None
            else ((self.shared,) if isinstance(self.shared, str) else tuple(self.shared))
        )
        return lambda name: name.startswith(prefixes)

    def prepare(self, model: nn.Module) -> nn.Module:
        """Records the pretrained parameters' current values ``w_s^0`` and which parameters are new."""
        is_shared = self._is_shared(model)
        self._anchored, self._new, self.shared_names = [], [], []
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            if is_shared(name):
                self._anchored.append((param, param.detach().clone()))
                self.shared_names.append(name)
            else:
                self._new.append(param)
        if not self._anchored:
            raise ConfigError(
                f"no parameter of {type(model).__name__} matches shared={self.shared!r}; L2-SP needs "
                "the pretrained parameters"
            )
        return model

    def penalty(self, ctx: StepContext) -> torch.Tensor:
        """``alpha/2 ||w_s - w_s^0||^2 + beta/2 ||w_new||^2`` (a scalar); needs :meth:`prepare` first."""
        if not self._anchored:
            raise ConfigError("L2SP.penalty needs prepare(model) first (embreg's Trainer and HF adapter call it)")
        first = self._anchored[0][0]
        total = first.new_zeros((), dtype=torch.float32)
        if self.alpha:
            drift = first.new_zeros((), dtype=torch.float32)
            for index, (param, start) in enumerate(self._anchored):
                if start.device != param.device:
                    start = start.to(param.device)
                    self._anchored[index] = (param, start)
                drift = drift + (param - start).pow(2).sum()
            total = total + 0.5 * self.alpha * drift
        if self.beta and self._new:
            total = total + 0.5 * self.beta * sum(p.pow(2).sum() for p in self._new)
        return total


@dataclass
class L2SPConfig:
    """``regularizers: [{name: l2sp, alpha: 0.01, beta: 0.0}]`` (see :class:`L2SP`).

    ``shared``: name prefix(es) of the pretrained parameters (``null``: found from the model, e.g. ``encoder.``
    for the encoder classifier; for a model trained from scratch name the prefix of the parameters to anchor at
    their initial values).
    """

    alpha: float = 0.01
    beta: float = 0.0
    shared: str | list[str] | None = None

    def __post_init__(self) -> None:
        build_l2sp(self, None)  # the class checks every argument: a bad value fails when the recipe loads


@register(
    "regularizer",
    "l2sp",
    config=L2SPConfig,
    requires=("pretrained",),
    summary="L2-SP: pull the pretrained weights towards their starting values, L2 on the new ones",
    reference="lnsr-noise-stability-bert.txt, Sec. 4.2 (Li et al., 2018)",
)
def build_l2sp(config: L2SPConfig, context: Any) -> L2SP:
    return L2SP(config.alpha, config.beta, shared=config.shared)

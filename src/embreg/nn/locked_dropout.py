"""Locked (variational) dropout: one mask per sequence, shared across time.

Reference: nlp-best-practices.txt, "Recurrent dropout" (Gal & Ghahramani, 2016): "applying the same dropout mask
across timesteps ... avoids amplifying the dropout noise along the sequence". Used by the AWD-style LSTM language
model on its inputs, between layers and on its outputs (dropout-explicit-implicit-regularization.txt, Sec. 5.1).
"""

from __future__ import annotations

import torch

from embreg.nn._checks import check_probability
from embreg.nn.dropout_control import DropoutBlock

__all__ = ["LockedDropout", "locked_dropout", "locked_dropout_mask"]


def locked_dropout_mask(
    shape: torch.Size | tuple[int, ...],
    q: float,
    *,
    time_dim: int = 1,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """An inverted-dropout mask of ``shape`` with size 1 along ``time_dim``: entries ``0`` or ``1 / (1 - q)``.

    In the paper's notation the multiplier is ``1 + eta`` with ``eta = -1`` w.p. ``q`` and ``q / (1 - q)``
    otherwise (Sec. 2), so its mean is 1.

    Args:
        shape: shape of the tensor the mask will multiply, e.g. ``(B, T, D)``.
        q: drop probability in ``[0, 1)``.
        time_dim: the axis along which the mask is shared.
        generator: optional torch generator for the Bernoulli draws.

    Returns:
        A tensor broadcastable to ``shape`` (``(B, 1, D)`` for ``time_dim=1``).

    Example:
        >>> locked_dropout_mask((2, 5, 3), 0.5).shape
        torch.Size([2, 1, 3])
    """
    q = check_probability(q)
    mask_shape = list(shape)
    mask_shape[time_dim] = 1
    keep = torch.full(mask_shape, 1.0 - q, device=device, dtype=dtype)
    return torch.bernoulli(keep, generator=generator) / (1.0 - q)


def locked_dropout(
    x: torch.Tensor, q: float, *, training: bool = True, time_dim: int = 1, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Applies one dropout mask per sequence to ``x``, the same at every time step.

    Args:
        x: ``(B, T, D)`` (or any shape; the mask is shared along ``time_dim``).
        q: drop probability in ``[0, 1)``.
        training: when False (or ``q == 0``) ``x`` is returned unchanged.
        time_dim: the time axis.
        generator: optional torch generator.

    Example:
        >>> y = locked_dropout(torch.ones(1, 4, 3), 0.5)
        >>> bool((y == y[:, :1]).all())  # every step has the same mask
        True
    """
    q = check_probability(q)
    if not training or q == 0.0:
        return x
    mask = locked_dropout_mask(x.shape, q, time_dim=time_dim, generator=generator, device=x.device, dtype=x.dtype)
    return x * mask


class LockedDropout(DropoutBlock):
    """Module form of :func:`locked_dropout`; identity in eval mode, at ``q = 0`` and under ``dropout_disabled``.

    Args:
        q: drop probability in ``[0, 1)``.
        time_dim: the axis shared by the mask (1 for batch-first ``(B, T, D)``).

    Example:
        >>> drop = LockedDropout(0.4)
        >>> drop(torch.randn(8, 35, 16)).shape
        torch.Size([8, 35, 16])
    """

    def __init__(self, q: float, *, time_dim: int = 1) -> None:
        super().__init__(q)
        self.time_dim = time_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return locked_dropout(x, self.q, training=self.active, time_dim=self.time_dim)

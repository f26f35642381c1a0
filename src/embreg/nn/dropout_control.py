"""Switching a model's dropout off while it stays in training mode.

The analytic regularisers of dropout-explicit-implicit-regularization.txt (Sec. 4, Alg. 2 and 4) evaluate the
model *without* dropout noise at training time (the clean forward ``F(x)`` whose Jacobians they use), while the
Dropout_k objective of the same step needs the noise. ``model.eval()`` would also change unrelated layers, so every
dropout block in :mod:`embreg.nn` derives from :class:`DropoutBlock` and can be paused by :func:`dropout_disabled`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from embreg.nn._checks import check_probability


class DropoutBlock(nn.Module):
    """Base of the dropout blocks: a probability ``q`` and an ``enabled`` switch.

    Noise is applied only when ``self.training and self.enabled and q > 0`` (see :attr:`active`).

    Args:
        q: drop probability in ``[0, 1)``.
    """

    def __init__(self, q: float) -> None:
        super().__init__()
        self.q = check_probability(q)
        self.enabled = True

    @property
    def active(self) -> bool:
        """Whether a forward call now draws a mask."""
        return self.training and self.enabled and self.q > 0

    def extra_repr(self) -> str:
        return f"q={self.q}"


def dropout_blocks(model: nn.Module) -> list[DropoutBlock]:
    """Every :class:`DropoutBlock` inside ``model`` (including ``model`` itself)."""
    return [m for m in model.modules() if isinstance(m, DropoutBlock)]


def dropout_active(model: nn.Module) -> bool:
    """Whether a forward pass of ``model`` would draw any dropout mask right now.

    Example:
        >>> from embreg.nn import LockedDropout
        >>> block = LockedDropout(0.5)
        >>> dropout_active(block), dropout_active(block.eval())
        (True, False)
    """
    return any(block.active for block in dropout_blocks(model))


@contextmanager
def dropout_disabled(model: nn.Module) -> Iterator[nn.Module]:
    """Context in which every :class:`DropoutBlock` of ``model`` is the identity; restores the switches after.

    Example:
        >>> import torch
        >>> from embreg.nn import LockedDropout
        >>> block = LockedDropout(0.5)
        >>> x = torch.ones(2, 3, 4)
        >>> with dropout_disabled(block):
        ...     torch.equal(block(x), x)
        True
    """
    blocks = dropout_blocks(model)
    saved = [block.enabled for block in blocks]
    for block in blocks:
        block.enabled = False
    try:
        yield model
    finally:
        for block, state in zip(blocks, saved):
            block.enabled = state

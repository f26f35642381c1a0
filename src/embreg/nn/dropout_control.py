"""Switching a model's dropout off while it stays in training mode.

The analytic regularisers of dropout-explicit-implicit-regularization.txt (Sec. 4, Alg. 2 and 4) evaluate the
model *without* dropout noise at training time (the clean forward ``F(x)`` whose Jacobians they use), while the
Dropout_k objective of the same step needs the noise. ``model.eval()`` would also change unrelated layers, so every
dropout block in :mod:`embreg.nn` derives from :class:`DropoutBlock` and can be paused by :func:`dropout_disabled`.
torch's own dropout modules (``nn.Dropout`` and the rest of its ``_DropoutNd`` family, as in MF, BPR, NCF and the
Hugging Face encoders) count as dropout here too: :func:`dropout_active` sees them and :func:`dropout_disabled` pauses
them (their ``p`` is 0 inside the context). Dropout drawn by a functional call inside a ``forward`` (``F.dropout``)
is not a module and is seen by neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn
from torch.nn.modules.dropout import _DropoutNd

from embreg.nn._checks import check_probability

__all__ = ["DropoutBlock", "dropout_blocks", "torch_dropouts", "has_dropout", "dropout_active", "dropout_disabled"]


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


def torch_dropouts(model: nn.Module) -> list[_DropoutNd]:
    """Every torch dropout module inside ``model`` (``nn.Dropout``, ``nn.Dropout1d/2d/3d``, ``nn.AlphaDropout``...)."""
    return [m for m in model.modules() if isinstance(m, _DropoutNd)]


def has_dropout(model: nn.Module) -> bool:
    """Whether ``model`` holds a dropout block or torch dropout module that draws masks in training mode.

    Example:
        >>> has_dropout(nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))), has_dropout(nn.Dropout(0.0))
        (True, False)
    """
    return any(block.enabled and block.q > 0 for block in dropout_blocks(model)) or any(
        m.p > 0 for m in torch_dropouts(model)
    )


def dropout_active(model: nn.Module) -> bool:
    """Whether a forward pass of ``model`` would draw any dropout mask right now (its dropout blocks and torch's
    dropout modules).

    Example:
        >>> from embreg.nn import LockedDropout
        >>> block = LockedDropout(0.5)
        >>> dropout_active(block), dropout_active(block.eval()), dropout_active(nn.Dropout(0.1))
        (True, False, True)
    """
    return any(block.active for block in dropout_blocks(model)) or any(
        m.training and m.p > 0 for m in torch_dropouts(model)
    )


@contextmanager
def dropout_disabled(model: nn.Module) -> Iterator[nn.Module]:
    """Context in which every :class:`DropoutBlock` and torch dropout module of ``model`` is the identity; restores
    the switches (and the torch modules' ``p``) after.

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
    modules = torch_dropouts(model)
    probabilities = [m.p for m in modules]
    for block in blocks:
        block.enabled = False
    for m in modules:
        m.p = 0.0
    try:
        yield model
    finally:
        for block, state in zip(blocks, saved):
            block.enabled = state
        for m, p in zip(modules, probabilities):
            m.p = p

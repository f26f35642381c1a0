"""Where a model's index transforms act, so that a trainer can draw them before the batch reaches the model.

A model with index transforms (ids -> ids modules such as :class:`embreg.sse.SSE`, applied in training) offers two
methods for :mod:`embreg.train.host_draws`:

* ``index_transforms() -> list[nn.Module]``: its transform modules (none for ``None``/``nn.Identity``);
* ``draw_index_transforms(batch) -> batch``: a new batch whose id tensors hold what one training step's forward
  pass would draw (the same calls, in the same order, so the random streams are the same), computed wherever
  ``batch`` lives.

While an :class:`~embreg.sse.base.IndexTransform` has ``passthrough`` set, it hands ids back untouched, and the
models skip the masking around it: the forward pass then reads the drawn ids from the batch.
:class:`KeyedTransforms` implements both methods for models whose transforms act on whole batch keys
(MF, BPR, NCF).

Example:
    >>> from embreg.sse import SSE
    >>> class Pairs(KeyedTransforms, nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.user_transform, self.item_transform = SSE(5, p=1.0, seed=0), nn.Identity()
    ...     def transform_sites(self):
    ...         return [("user", self.user_transform), ("item", self.item_transform)]
    >>> model = Pairs()
    >>> [type(t).__name__ for t in model.index_transforms()]
    ['SSE']
    >>> drawn = model.draw_index_transforms({"user": torch.tensor([0, 1]), "item": torch.tensor([2, 3])})
    >>> drawn["item"].tolist(), bool((drawn["user"] != torch.tensor([0, 1])).all())
    ([2, 3], True)
"""

from __future__ import annotations

import abc
from collections.abc import Iterable

import torch
from torch import nn

__all__ = ["KeyedTransforms", "is_passed_through", "present_transforms"]


def is_passed_through(transform: nn.Module | None) -> bool:
    """True when ``transform`` is an index transform told to hand ids back untouched (drawn upstream)."""
    return bool(getattr(transform, "passthrough", False))


def present_transforms(transforms: Iterable[nn.Module | None]) -> list[nn.Module]:
    """The distinct modules among ``transforms``, without ``None`` and ``nn.Identity``, in first-seen order."""
    found: list[nn.Module] = []
    for transform in transforms:
        if transform is not None and not isinstance(transform, nn.Identity) and all(transform is not t for t in found):
            found.append(transform)
    return found


class KeyedTransforms(abc.ABC):
    """Mixin for ``nn.Module`` models whose transforms map whole batch keys (``batch[key] -> transform(...)``).

    Subclasses list their sites in :meth:`transform_sites`, in the order their ``forward`` applies them.
    """

    @abc.abstractmethod
    def transform_sites(self) -> list[tuple[str, nn.Module]]:
        """``(batch key, transform)`` pairs in the order ``forward`` applies them."""

    def index_transforms(self) -> list[nn.Module]:
        """The model's index transform modules (``nn.Identity`` left out)."""
        return present_transforms(transform for _, transform in self.transform_sites())

    def draw_index_transforms(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` with each site's key replaced by its transform's output (training mode: the swaps)."""
        drawn = dict(batch)
        for key, transform in self.transform_sites():
            if not isinstance(transform, nn.Identity):
                drawn[key] = transform(batch[key])
        return drawn

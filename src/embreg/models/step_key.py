"""Which training step a forward pass belongs to, so index transforms are drawn once per step.

A step may call a model more than once (a regulariser's second forward pass, ``loss`` after ``forward``); every
call of one step must see the same swapped ids. A step is identified by the batch's ``index`` and the version
counters of the model's parameters, which every optimizer step bumps.

Example:
    >>> import torch
    >>> layer = torch.nn.Linear(2, 2)
    >>> before = step_key({"index": torch.tensor(3)}, layer)
    >>> with torch.no_grad():
    ...     _ = layer.weight.add_(1.0)
    >>> before == step_key({"index": torch.tensor(3)}, layer)
    False
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["step_key"]


def step_key(batch: dict[str, torch.Tensor], module: nn.Module) -> tuple[int | None, int]:
    """``(batch index or None, sum of the parameters' version counters)``: equal within one training step."""
    return (
        int(batch["index"]) if "index" in batch else None,
        sum(p._version for p in module.parameters()),
    )

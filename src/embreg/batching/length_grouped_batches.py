"""Mini-batches of texts of similar length: each batch is then cut to its own longest text, so little is padding.

A batch of texts is padded to its longest member (the models cut the columns that are padding in every row,
:func:`embreg.models.encoder_classifier.trim_padding`); drawn at random, a batch of 32 clothing reviews almost always
holds one of 128 word pieces, so a third of every step's tokens are padding. Grouping by length, as Hugging Face's
``Trainer`` does with ``group_by_length``, removes most of it: each epoch's random permutation is cut into groups of
``group_batches`` batches, each group is sorted by length and cut into batches, and the batches are then put in a
random order (the incomplete batch, if any, stays last). Every example is still seen once per epoch, and the epoch's
order depends only on ``(seed, epoch)``, so a resumed run replays it.

What changes is which texts share a batch (texts of similar length), not the model's computation on a batch: the
padding a batch no longer carries was never attended to nor predicted.

Example:
    >>> batches = LengthGroupedBatches({"x": torch.arange(8)}, torch.tensor([1, 9, 2, 8, 3, 7, 4, 6]), batch_size=2,
    ...                                seed=0)
    >>> sorted(sorted(b["x"].tolist()) for b in batches.epoch(0))  # similar lengths share a batch
    [[0, 2], [1, 3], [4, 6], [5, 7]]
"""

from __future__ import annotations

import torch

from embreg.batching.batches import BatchTransform, TensorBatches

__all__ = ["LengthGroupedBatches", "length_grouped_order", "GROUP_BATCHES"]

GROUP_BATCHES = 50
"""Batches per length group (Hugging Face's ``LengthGroupedSampler`` uses 50): large enough that a group's sorted
batches hold texts of nearly one length, small enough that the texts of a batch still come from all over the data."""


def length_grouped_order(
    order: torch.Tensor, lengths: torch.Tensor, unit: int, group_batches: int, generator: torch.Generator
) -> torch.Tensor:
    """``order`` rearranged so that each run of ``unit`` consecutive examples holds similar lengths.

    Args:
        order: ``(N,)`` a permutation of the example indices (the epoch's random order).
        lengths: ``(N,)`` each example's length (e.g. its non-padding tokens).
        unit: examples per batch (``batch_size x world_size`` under data parallelism: each rank's share of a unit,
            every ``world_size``-th example, is then of similar length too).
        group_batches: batches per sorted group.
        generator: draws the batches' order.

    Returns:
        ``(N,)`` the same indices: whole units in a random order, the incomplete unit (if any) last.

    Example:
        >>> length_grouped_order(torch.arange(5), torch.tensor([5, 1, 4, 2, 3]), 2, 50,
        ...                      torch.Generator().manual_seed(0)).tolist()[-1]  # the shortest text: the last unit
        1
    """
    if unit < 1 or group_batches < 1:
        raise ValueError(f"unit={unit} and group_batches={group_batches} must be >= 1")
    units: list[torch.Tensor] = []
    for group in order.split(unit * group_batches):
        by_length = torch.argsort(lengths[group], descending=True, stable=True)
        units.extend(group[by_length].split(unit))
    tail = [units.pop()] if units and units[-1].numel() < unit else []
    shuffled = [units[i] for i in torch.randperm(len(units), generator=generator).tolist()]
    return torch.cat(shuffled + tail) if shuffled or tail else order


class LengthGroupedBatches(TensorBatches):
    """:class:`~embreg.batching.batches.TensorBatches` whose batches hold texts of similar length (module docstring).

    Args:
        tensors: named tensors whose first dimension is the example axis, all of length ``N``.
        lengths: ``(N,)`` each example's length, e.g. ``attention_mask.sum(1)``.
        batch_size: examples per batch.
        group_batches: batches per sorted group (:data:`GROUP_BATCHES`).
        seed, transform, drop_last, device, rank, world_size: as for :class:`TensorBatches`.
    """

    def __init__(
        self,
        tensors: dict[str, torch.Tensor],
        lengths: torch.Tensor,
        batch_size: int,
        *,
        group_batches: int = GROUP_BATCHES,
        seed: int = 0,
        transform: BatchTransform | None = None,
        drop_last: bool = False,
        device: str | torch.device = "cpu",
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        super().__init__(
            tensors,
            batch_size,
            shuffle=True,
            seed=seed,
            transform=transform,
            drop_last=drop_last,
            device=device,
            rank=rank,
            world_size=world_size,
        )
        if lengths.shape != (self.num_examples,):
            raise ValueError(f"lengths has shape {tuple(lengths.shape)}, expected ({self.num_examples},)")
        if group_batches < 1:
            raise ValueError(f"group_batches={group_batches} must be >= 1")
        self.lengths = lengths.cpu()
        self.group_batches = group_batches

    def _order(self, generator: torch.Generator) -> torch.Tensor:
        order = torch.randperm(self.num_examples, generator=generator)
        order = length_grouped_order(
            order, self.lengths, self.batch_size * self.world_size, self.group_batches, generator
        )
        if self.world_size > 1:
            padded = self.shard_examples * self.world_size
            order = torch.cat([order, order[: padded - self.num_examples]])[self.rank :: self.world_size]
        return order.to(self.device)

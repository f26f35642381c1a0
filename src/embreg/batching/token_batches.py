"""Batches of sentences of similar lengths under a token budget (fairseq's ``--max-tokens``), each cut to its width.

Padded sequence batches waste the compute of their padding: dictionary phrases of 3 to 25 tokens drawn at random
into batches of 64 are about half padding. :class:`TokenBudgetBatches` sorts the examples by their lengths (the
first tensor's, then the next's: for translation, source then target), breaking ties at random each epoch, and
cuts the sorted order into batches that hold at most ``max_tokens`` padded tokens on their longest side and at most
``max_examples`` examples; each batch is cut to its own longest row, and the batches are visited in a fresh random
order every epoch. The cuts depend on the lengths only, so every epoch has the same number of batches (the
learning-rate schedule's length) while the examples sharing a length change batches between epochs (Ott et al.
2019, fairseq, ``--max-tokens``; the same idea as Hugging Face's ``group_by_length``, on both sides of the pair).

Under data-parallel training each rank takes every ``world_size``-th batch of the epoch's order (the order is
extended by its beginning so that every rank takes the same number of steps).

Example:
    >>> source = torch.tensor([[5, 2, 0, 0], [5, 6, 7, 2], [5, 6, 2, 0], [5, 2, 0, 0]])
    >>> batches = TokenBudgetBatches({"source": source}, max_tokens=4, seed=0)
    >>> sorted(tuple(b["source"].shape) for b in batches.epoch(0)), len(batches)
    ([(1, 3), (1, 4), (2, 2)], 3)
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import torch

from embreg.train.seeding import epoch_generator

__all__ = ["TokenBudgetBatches", "budget_cuts"]

Batch = dict[str, torch.Tensor]


def budget_cuts(widths: torch.Tensor, max_tokens: int, max_examples: int | None = None) -> list[int]:
    """End positions of consecutive batches over examples sorted by length, ``widths (N,)`` each example's longest
    side: a batch grows while ``count * max(widths in it) <= max_tokens`` and ``count <= max_examples``; an example
    wider than the budget gets a batch of its own.

    Example:
        >>> budget_cuts(torch.tensor([2, 2, 3, 4, 4]), max_tokens=8)
        [2, 4, 5]
    """
    cuts: list[int] = []
    count, width = 0, 0
    for position, value in enumerate(widths.tolist()):
        wider = max(width, value)
        if count and ((count + 1) * wider > max_tokens or (max_examples is not None and count + 1 > max_examples)):
            cuts.append(position)
            count, wider = 0, value
        count, width = count + 1, wider
    cuts.append(len(widths))
    return cuts


class TokenBudgetBatches:
    """Length-sorted batches under a token budget (see the module docstring).

    Args:
        tensors: right-padded ``(N, L_k)`` id tensors (every one with ``N`` rows); the lengths are the counts of
            non-``pad`` ids, sorted by the first tensor's, then the next's.
        max_tokens: the most padded tokens of a batch on its longest side (``rows * width``).
        max_examples: the most rows of a batch (``None``: the budget alone).
        seed: epoch ``e`` draws its tie-breaking and its batch order from ``epoch_generator(seed, e)``, so an epoch
            replays exactly after a resume.
        pad: the padding id.
        device: where the batches are moved.
        rank, world_size: this process's share of every epoch's batches.

    Raises:
        ValueError: no tensors, tensors of different lengths or ``max_tokens < 1``.
    """

    def __init__(
        self,
        tensors: dict[str, torch.Tensor],
        max_tokens: int,
        *,
        max_examples: int | None = None,
        seed: int = 0,
        pad: int = 0,
        device: str | torch.device = "cpu",
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if not tensors:
            raise ValueError("tensors is empty: nothing to batch")
        rows = {name: t.shape[0] for name, t in tensors.items()}
        if len(set(rows.values())) != 1 or not next(iter(rows.values())):
            raise ValueError(f"every tensor needs the same, non-zero number of rows, got {rows}")
        if max_tokens < 1 or (max_examples is not None and max_examples < 1):
            raise ValueError(f"max_tokens={max_tokens} and max_examples={max_examples} must be >= 1")
        self.tensors = {name: t.to(device) for name, t in tensors.items()}
        self.lengths = {name: (t != pad).sum(dim=1).cpu() for name, t in tensors.items()}
        self.max_tokens, self.max_examples = max_tokens, max_examples
        self.seed, self.device = seed, torch.device(device)
        self.rank, self.world_size = rank, world_size
        self.pin_memory = False
        keys = list(self.lengths.values())
        order = self._sorted(torch.arange(len(keys[0])))
        widths = torch.stack(keys, dim=1).max(dim=1).values[order]
        self.cuts = budget_cuts(widths, max_tokens, max_examples)

    @property
    def num_examples(self) -> int:
        return int(next(iter(self.lengths.values())).shape[0])

    def _sorted(self, order: torch.Tensor) -> torch.Tensor:
        """``order`` stably sorted by the lengths: the last tensor's first, so the first tensor's ends up leading."""
        for lengths in reversed(list(self.lengths.values())):
            order = order[torch.sort(lengths[order], stable=True).indices]
        return order

    def __len__(self) -> int:
        return -(-len(self.cuts) // self.world_size)

    def sharded(self, rank: int, world_size: int) -> TokenBudgetBatches:
        """The same batches for process ``rank`` of ``world_size``: every ``world_size``-th batch of each epoch."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
        shard = copy.copy(self)
        shard.rank, shard.world_size = rank, world_size
        return shard

    def pinned(self) -> TokenBudgetBatches:
        """The same batches gathered into page-locked memory (for asynchronous copies to a GPU).

        Raises:
            RuntimeError: no CUDA device to pin memory for.
        """
        if self.device.type != "cpu":
            return self
        if not torch.cuda.is_available():
            raise RuntimeError("pinned batches need CUDA: page-locked memory only speeds up copies to a GPU")
        pinned = copy.copy(self)
        pinned.pin_memory = True
        return pinned

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The batches of epoch ``epoch`` (0-based) in a seeded order (this process's share of them)."""
        generator = epoch_generator(self.seed, epoch)
        order = self._sorted(torch.randperm(self.num_examples, generator=generator))
        visit = torch.randperm(len(self.cuts), generator=generator)
        if self.world_size > 1:
            padded = len(self) * self.world_size
            visit = torch.cat([visit, visit[: padded - len(visit)]])[self.rank :: self.world_size]
        starts = [0, *self.cuts[:-1]]
        for b in visit.tolist():
            chosen = order[starts[b] : self.cuts[b]]
            index = chosen.to(self.device)
            batch = {}
            for name, t in self.tensors.items():
                width = max(int(self.lengths[name][chosen].max()), 1)
                rows = t[index, :width]
                batch[name] = rows.pin_memory() if self.pin_memory else rows
            yield batch

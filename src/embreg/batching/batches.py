"""Mini-batches straight from tensors: one shuffled index permutation per epoch, no per-example collation.

Under data-parallel training each process takes :meth:`TensorBatches.sharded`: a disjoint share of every epoch's
permutation (see :mod:`embreg.train.distributed`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch

from embreg.batching.packed_rows import PackedRows
from embreg.train.seeding import epoch_generator, rank_epoch_generator

Batch = dict[str, torch.Tensor]
_CHUNK_EXAMPLES = 1 << 16
"""Examples gathered at once when an epoch's batches are cut (bounds the extra memory to this many rows)."""
BatchTransform = Callable[[Batch, torch.Generator], Batch]


class TensorBatches:
    """Yields dict mini-batches from equally long tensors, reshuffled by a per-epoch seeded generator.

    Args:
        tensors: named tensors whose first dimension is the example axis, all of length ``N``.
        batch_size: examples per batch (the last batch may be smaller unless ``drop_last``).
        shuffle: shuffle the examples each epoch.
        seed: base seed; epoch ``e`` uses ``epoch_generator(seed, e)``, so batches replay exactly after a resume.
        transform: optional ``(batch, generator) -> batch`` applied to every batch, e.g. negative sampling; it
            receives the epoch's generator so its randomness is seeded too.
        drop_last: drop a final incomplete batch.
        device: device the batches are moved to.
        rank, world_size: this process's shard (see :meth:`sharded`); ``0, 1`` trains on every example.

    Example:
        >>> batches = TensorBatches({"x": torch.arange(10)}, batch_size=4, seed=0)
        >>> [b["x"].numel() for b in batches.epoch(0)]
        [4, 4, 2]
        >>> len(batches)
        3
    """

    def __init__(
        self,
        tensors: dict[str, torch.Tensor],
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        transform: BatchTransform | None = None,
        drop_last: bool = False,
        device: str | torch.device = "cpu",
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if not tensors:
            raise ValueError("tensors is empty: nothing to batch")
        lengths = {name: t.shape[0] for name, t in tensors.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"all tensors need the same length, got {lengths}")
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be >= 1")
        self.num_examples = next(iter(lengths.values()))
        if self.num_examples == 0:
            raise ValueError("tensors have no examples")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
        self.rank, self.world_size = rank, world_size
        self.tensors = {name: t.to(device) for name, t in tensors.items()}
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.transform = transform
        self.drop_last = drop_last
        self.device = torch.device(device)
        self.pin_memory = False
        # several CPU tensors: shuffled gathers read each example's values together (see PackedRows)
        self._rows = PackedRows(self.tensors) if len(self.tensors) > 1 and self.device.type == "cpu" else None

    def pinned(self) -> TensorBatches:
        """The same batches, gathered into page-locked (pinned) host memory, so that copying each batch to a GPU
        is asynchronous and overlaps the previous step. The trainer asks for them when it trains on CUDA; they
        need a CUDA build of torch with a GPU.

        Raises:
            RuntimeError: no CUDA device to pin memory for.
        """
        if self.device.type != "cpu":
            return self  # the examples already live on the device: nothing is copied per batch
        if not torch.cuda.is_available():
            raise RuntimeError("pinned batches need CUDA: page-locked memory only speeds up copies to a GPU")
        pinned = copy.copy(self)
        pinned.pin_memory = True
        return pinned

    def _gather(self, index: torch.Tensor) -> Batch:
        """Every tensor's examples at ``index``, contiguous (pinned when asked)."""
        if self._rows is not None:
            return self._rows.gather(index, pin_memory=self.pin_memory)
        if not self.pin_memory:
            return {name: t[index] for name, t in self.tensors.items()}
        out = {}
        for name, t in self.tensors.items():
            out[name] = torch.empty((index.numel(), *t.shape[1:]), dtype=t.dtype, pin_memory=True)
            torch.index_select(t, 0, index, out=out[name])
        return out

    def sharded(self, rank: int, world_size: int) -> TensorBatches:
        """The same batches for process ``rank`` of ``world_size``: a disjoint share of every epoch.

        Every rank draws the same permutation of the ``N`` examples and takes every ``world_size``-th of them from
        position ``rank`` on; the permutation is first extended by its own beginning to a multiple of
        ``world_size`` (as ``torch.utils.data.DistributedSampler`` does), so all ranks take the same number of
        steps. ``batch_size`` stays per process. The batch transform (e.g. negative sampling) gets a generator of
        its own per rank, so no two ranks draw the same negatives.

        Example:
            >>> batches = TensorBatches({"x": torch.arange(5)}, batch_size=2, seed=0)
            >>> shards = [sorted(torch.cat([b["x"] for b in batches.sharded(r, 2).epoch(0)]).tolist()) for r in (0, 1)]
            >>> len(shards[0]) == len(shards[1]) == 3, sorted(set(shards[0]) | set(shards[1]))
            (True, [0, 1, 2, 3, 4])
        """
        shard = copy.copy(self)
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
        shard.rank, shard.world_size = rank, world_size
        return shard

    @property
    def shard_examples(self) -> int:
        """Examples this process trains on per epoch: ``ceil(N / world_size)``."""
        return -(-self.num_examples // self.world_size)

    def __len__(self) -> int:
        if self.drop_last:
            return self.shard_examples // self.batch_size
        return -(-self.shard_examples // self.batch_size)

    def _order(self, generator: torch.Generator) -> torch.Tensor:
        if self.shuffle:
            order = torch.randperm(self.num_examples, generator=generator)
        else:
            order = torch.arange(self.num_examples)
        if self.world_size > 1:
            padded = self.shard_examples * self.world_size
            order = torch.cat([order, order[: padded - self.num_examples]])[self.rank :: self.world_size]
        return order.to(self.device)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The batches of epoch ``epoch`` (0-based), in a seeded order (this process's shard of it)."""
        generator = epoch_generator(self.seed, epoch)
        order = self._order(generator)
        if self.world_size > 1:  # the shared generator made the shared permutation; sampling is per rank
            generator = rank_epoch_generator(self.seed, epoch, self.rank)
        # The examples are gathered in permuted order a chunk of batches at a time (one gather per chunk, not per
        # batch and tensor: their fixed costs were a fused step's largest overhead); each batch is then a slice.
        per_chunk = max(1, _CHUNK_EXAMPLES // self.batch_size) * self.batch_size
        for b in range(len(self)):
            start = b * self.batch_size
            if start % per_chunk == 0:
                index = order[start : start + per_chunk]
                chunk = self._gather(index)
            offset = start % per_chunk
            batch = {name: t[offset : offset + self.batch_size] for name, t in chunk.items()}
            if self.transform is not None:
                batch = self.transform(batch, generator)
            yield batch


def endless_batches(batches: TensorBatches | Any) -> Iterator[Batch]:
    """Every batch of epoch 0, then of epoch 1, and so on without end: a source of steps for timing a trainer.

    Args:
        batches: anything with ``epoch(n)`` yielding batches (:class:`TensorBatches`, the LM's BPTT batches).

    Example:
        >>> source = endless_batches(TensorBatches({"x": torch.arange(3)}, batch_size=2, seed=0))
        >>> [len(next(source)["x"]) for _ in range(3)]
        [2, 1, 2]
    """
    epoch = 0
    while True:
        yield from batches.epoch(epoch)
        epoch += 1

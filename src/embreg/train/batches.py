"""Mini-batches straight from tensors: one shuffled index permutation per epoch, no per-example collation."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from embreg.train.seeding import epoch_generator

Batch = dict[str, torch.Tensor]
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
        self.tensors = {name: t.to(device) for name, t in tensors.items()}
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.transform = transform
        self.drop_last = drop_last
        self.device = torch.device(device)

    def __len__(self) -> int:
        if self.drop_last:
            return self.num_examples // self.batch_size
        return -(-self.num_examples // self.batch_size)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The batches of epoch ``epoch`` (0-based), in a seeded order."""
        generator = epoch_generator(self.seed, epoch)
        if self.shuffle:
            order = torch.randperm(self.num_examples, generator=generator).to(self.device)
        else:
            order = torch.arange(self.num_examples, device=self.device)
        for b in range(len(self)):
            index = order[b * self.batch_size : (b + 1) * self.batch_size]
            batch = {name: t[index] for name, t in self.tensors.items()}
            if self.transform is not None:
                batch = self.transform(batch, generator)
            yield batch

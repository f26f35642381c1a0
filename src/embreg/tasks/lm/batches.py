"""Truncated back-propagation through time (BPTT) batches for language models.

The training split, one long stream of token ids, is cut into ``B`` contiguous streams (``batchify``), and each epoch
walks through them in windows of ``bptt`` steps; the model carries its LSTM state from one window to the next
(dropout-explicit-implicit-regularization.txt, App. D.1: batch size 20 or 40 with the AWD-LSTM set-up).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import numpy as np
import torch

from embreg.errors import DataError
from embreg.train.seeding import epoch_generator


def batchify(ids: np.ndarray | torch.Tensor, streams: int) -> torch.Tensor:
    """Cuts a 1-D id sequence into ``streams`` contiguous rows, dropping the remainder: ``(B, L)``.

    Example:
        >>> batchify(np.arange(10), 3).tolist()
        [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    """
    ids = torch.as_tensor(np.asarray(ids), dtype=torch.long).reshape(-1)
    if streams < 1:
        raise DataError(f"streams={streams} must be >= 1")
    length = ids.numel() // streams
    if length < 2:
        raise DataError(f"{ids.numel()} tokens cannot fill {streams} streams of at least 2 tokens")
    return ids[: length * streams].reshape(streams, length)


class BPTTBatches:
    """Consecutive ``(B, T)`` windows over ``B`` streams: ``{"input", "target", "index", "reset"}``.

    ``target`` is ``input`` shifted by one token. ``index`` counts batches across epochs (so a model can tell a new
    batch from another pass over the same one) and ``reset`` is True on the first window of an epoch, where the
    model's carried state starts afresh. With ``variable_length`` the window length is drawn per batch as in
    AWD-LSTM (``bptt`` w.p. 0.95, else ``bptt / 2``, plus Gaussian jitter of std 5, at least 5) from a generator
    seeded by ``(seed, epoch)``, so a resumed epoch replays the same windows.

    Args:
        ids: the training stream (1-D).
        batch_size: number of streams ``B``.
        bptt: window length ``T``.
        variable_length: draw window lengths as above.
        seed: seed of the window lengths.

    Example:
        >>> batches = BPTTBatches(np.arange(101), batch_size=2, bptt=10)
        >>> first = next(iter(batches.epoch(0)))
        >>> first["input"].shape, first["target"][0, :3].tolist(), bool(first["reset"]), len(batches)
        (torch.Size([2, 10]), [1, 2, 3], True, 5)
    """

    def __init__(
        self,
        ids: np.ndarray | torch.Tensor,
        batch_size: int,
        bptt: int,
        *,
        variable_length: bool = False,
        seed: int = 0,
    ) -> None:
        if bptt < 1:
            raise DataError(f"bptt={bptt} must be >= 1")
        self.data = batchify(ids, batch_size)
        self.bptt = bptt
        self.variable_length = variable_length
        self.seed = seed

    def sharded(self, rank: int, world_size: int) -> BPTTBatches:
        """The windows of process ``rank`` of ``world_size``: the stream is cut into ``world_size x B`` rows and
        this process takes rows ``rank x B .. (rank + 1) x B - 1``, so each process carries ``B`` streams of its own
        (``batch_size`` stays per process) and all take the same windows, hence the same number of steps.

        Example:
            >>> batches = BPTTBatches(np.arange(41), batch_size=2, bptt=5)
            >>> [batches.sharded(r, 2).data[:, 0].tolist() for r in (0, 1)]
            [[0, 10], [20, 30]]
        """
        if not 0 <= rank < world_size:
            raise DataError(f"rank={rank} must be in [0, world_size={world_size})")
        streams = self.data.shape[0]
        shard = copy.copy(self)
        shard.data = batchify(self.data.reshape(-1), streams * world_size)[rank * streams : (rank + 1) * streams]
        return shard

    def __len__(self) -> int:
        return -(-(self.data.shape[1] - 1) // self.bptt)

    def _lengths(self, epoch: int) -> list[int]:
        total = self.data.shape[1] - 1
        if not self.variable_length:
            return [min(self.bptt, total - s) for s in range(0, total, self.bptt)]
        generator = epoch_generator(self.seed, epoch)
        lengths, start = [], 0
        while start < total:
            base = self.bptt if torch.rand((), generator=generator).item() < 0.95 else self.bptt / 2
            length = max(5, int(round(base + 5 * torch.randn((), generator=generator).item())))
            length = min(length, total - start)
            lengths.append(length)
            start += length
        return lengths

    def epoch(self, epoch: int) -> Iterator[dict[str, torch.Tensor]]:
        """The windows of epoch ``epoch`` in stream order."""
        start = 0
        base = epoch * (len(self) * 4 + 16)  # spaced so that indices of different epochs never collide
        for i, length in enumerate(self._lengths(epoch)):
            yield {
                "input": self.data[:, start : start + length],
                "target": self.data[:, start + 1 : start + 1 + length],
                "index": torch.tensor(base + i),
                "reset": torch.tensor(i == 0),
            }
            start += length

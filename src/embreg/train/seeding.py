"""Seeded randomness: one place that turns (seed, epoch) into generators, so a resumed run replays exactly."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import torch

_EPOCH_STRIDE = 1_000_003  # a prime, so (seed, epoch) pairs map to distinct streams for any realistic run


def seed_everything(seed: int) -> None:
    """Seeds Python's, NumPy's and torch's global generators (e.g. for dropout masks and initialisation)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def epoch_generator(seed: int, epoch: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A fresh generator for one epoch's shuffling and sampling, derived only from ``(seed, epoch)``.

    Because it depends on nothing else, an epoch replayed after a resume draws the same batches.
    """
    generator = torch.Generator(device=device)
    generator.manual_seed(seed * _EPOCH_STRIDE + epoch)
    return generator


def rank_seed(seed: int, rank: int) -> int:
    """The seed of data-parallel rank ``rank``'s own streams: ``seed`` itself on rank 0, a hash of ``(seed, rank)``
    elsewhere (below 2**62, like every torch seed embreg uses).

    Example:
        >>> rank_seed(7, 0), rank_seed(7, 1) != rank_seed(7, 2)
        (7, True)
    """
    if rank == 0:
        return seed
    digest = hashlib.blake2b(f"embreg-rank/{seed}/{rank}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 2


def rank_epoch_generator(seed: int, epoch: int, rank: int) -> torch.Generator:
    """A generator of one epoch's sampling on data-parallel rank ``rank`` (different for every rank and epoch)."""
    return epoch_generator(rank_seed(seed, rank + 1) % 2**40, epoch)

"""Seeded randomness: one place that turns (seed, epoch) into generators, so a resumed run replays exactly."""

from __future__ import annotations

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

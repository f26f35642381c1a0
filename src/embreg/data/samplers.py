"""Uniform negative sampling: for each user, an item that user has not interacted with.

Exact and vectorised, with no rejection loop. For user ``u`` with sorted positives
``p_0 < p_1 < ... < p_{k-1}``, the number of negatives below ``p_j`` is
``q_j = p_j - j``. Drawing ``r`` uniformly from ``[0, num_items - k)``, the
``r``-th negative is ``r + #{j : q_j <= r}``. Storing ``u * num_items + q_j`` for
all users in one sorted array turns that count into a single
``torch.searchsorted`` for the whole batch.
"""

from __future__ import annotations

import numpy as np
import torch

from embreg.errors import DataError


class NegativeSampler:
    """Samples, for each user id, an item uniformly among the items it has not interacted with.

    Args:
        users: (N,) user index of each (training) interaction.
        items: (N,) item index of each interaction; duplicates are fine.
        num_items: size of the item space.
        num_users: size of the user space; default ``max(users) + 1``. Users without
            interactions sample among all items.

    Raises:
        DataError: bad shapes or ranges, or a user who has interacted with every item.

    Example:
        >>> sampler = NegativeSampler(np.array([0, 0, 1]), np.array([0, 1, 2]), num_items=3)
        >>> sampler.sample(torch.tensor([0, 0]), torch.Generator().manual_seed(0)).tolist()
        [2, 2]
    """

    def __init__(self, users: np.ndarray, items: np.ndarray, num_items: int, *, num_users: int | None = None) -> None:
        users = np.asarray(users)
        items = np.asarray(items)
        if users.ndim != 1 or users.shape != items.shape:
            raise DataError(f"users and items must be 1-d of equal length, got shapes {users.shape} and {items.shape}")
        if num_items < 1:
            raise DataError(f"num_items={num_items} must be >= 1")
        users = users.astype(np.int64)
        items = items.astype(np.int64)
        if len(items) and (items.min() < 0 or items.max() >= num_items):
            raise DataError(f"items span [{items.min()}, {items.max()}]; valid range is [0, {num_items})")
        if len(users) and users.min() < 0:
            raise DataError(f"users contain {users.min()}; user indices must be >= 0")
        inferred = int(users.max()) + 1 if len(users) else 0
        num_users = inferred if num_users is None else int(num_users)
        if num_users < max(inferred, 1):
            raise DataError(f"num_users={num_users} but users go up to {inferred - 1}; need num_users >= {inferred}")
        keys = np.unique(users * num_items + items)
        key_users = keys // num_items
        degree = np.bincount(key_users, minlength=num_users)
        full = np.flatnonzero(degree >= num_items)
        if len(full):
            raise DataError(
                f"user {int(full[0])} has interacted with all {num_items} items, so it has no negatives "
                f"({len(full)} such users); drop them from training"
            )
        starts = np.concatenate([[0], np.cumsum(degree)[:-1]])
        rank = np.arange(len(keys)) - starts[key_users]
        self.num_items = int(num_items)
        self.num_users = num_users
        self._free_keys = torch.from_numpy(keys - rank)
        self._num_negatives = torch.from_numpy((num_items - degree).astype(np.int64))
        self._starts = torch.from_numpy(starts.astype(np.int64))
        self._on_device: dict[torch.device, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def num_negatives(self, users: torch.Tensor) -> torch.Tensor:
        """Number of items each user has not interacted with (same shape as ``users``)."""
        return self._buffers(users.device)[1][users]

    def _buffers(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if device not in self._on_device:
            self._on_device[device] = (
                self._free_keys.to(device),
                self._num_negatives.to(device),
                self._starts.to(device),
            )
        return self._on_device[device]

    def sample(self, users: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """One negative item per entry of ``users``.

        Args:
            users: int64 tensor of user indices, any shape, e.g. (B,) or (B, K).
            generator: source of randomness; must live on ``users``' device.

        Returns:
            int64 tensor of item indices, same shape and device as ``users``.
        """
        if users.dtype != torch.int64:
            raise DataError(f"users must be an int64 tensor, got {users.dtype}")
        if users.numel() == 0:
            return torch.empty_like(users)
        low, high = int(users.min()), int(users.max())
        if low < 0 or high >= self.num_users:
            raise DataError(f"users span [{low}, {high}]; valid range is [0, {self.num_users})")
        free_keys, num_negatives, starts = self._buffers(users.device)
        flat = users.reshape(-1)
        available = num_negatives[flat]
        uniform = torch.rand(flat.shape, generator=generator, device=users.device, dtype=torch.float64)
        r = torch.minimum((uniform * available).long(), available - 1)
        below = torch.searchsorted(free_keys, flat * self.num_items + r, right=True) - starts[flat]
        return (r + below).reshape(users.shape)

"""Seeded train/valid/test splits of interactions, as index arrays.

Every split is a ``dict`` with keys ``"train"``, ``"valid"``, ``"test"``, each a
sorted int64 array of positions; together they are disjoint and cover ``0..n-1``.
The same ``seed`` always gives the same split (``numpy.random.Generator``, PCG64).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embreg.errors import DataError

SPLIT_NAMES = ("train", "valid", "test")


def _check_fractions(fractions: Sequence[float]) -> np.ndarray:
    values = np.asarray(fractions, dtype=np.float64)
    if values.shape != (3,):
        raise DataError(f"fractions={tuple(fractions)} must be three numbers (train, valid, test)")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise DataError(f"fractions={tuple(fractions)} must all be positive (each in (0, 1))")
    if abs(values.sum() - 1.0) > 1e-6:
        raise DataError(f"fractions={tuple(fractions)} sum to {values.sum():.6g}; they must sum to 1")
    return values


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"seed={seed!r} must be a non-negative integer")
    return int(seed)


def _largest_remainder(n: int, fractions: np.ndarray) -> np.ndarray:
    """Integer sizes summing to n, each within 1 of n * fraction (Hamilton's method, ties to the earlier part)."""
    exact = fractions * n
    sizes = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - sizes), kind="stable")
    sizes[order[: n - int(sizes.sum())]] += 1
    return sizes


def min_split_rows(fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> int:
    """The fewest rows :func:`random_split` cuts into three non-empty parts with these fractions.

    Example:
        >>> min_split_rows((0.8, 0.1, 0.1)), min_split_rows((0.6, 0.2, 0.2))
        (7, 4)
    """
    values = _check_fractions(fractions)
    n = 3
    while not np.all(_largest_remainder(n, values) > 0):
        n += 1
    return n


def random_split(n: int, fractions: Sequence[float] = (0.8, 0.1, 0.1), *, seed: int) -> dict[str, np.ndarray]:
    """Shuffle ``0..n-1`` and cut it into train/valid/test of the given fractions.

    Sizes are ``n * fraction`` rounded by largest remainder, so they sum to ``n``.

    Args:
        n: number of interactions (>= 0).
        fractions: positive (train, valid, test) fractions summing to 1.
        seed: non-negative seed of the shuffle.

    Returns:
        ``{"train", "valid", "test"}`` -> sorted int64 index arrays.

    Example:
        >>> parts = random_split(10, seed=0)
        >>> [len(parts[k]) for k in ("train", "valid", "test")]
        [8, 1, 1]
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise DataError(f"n={n!r} must be a non-negative integer")
    sizes = _largest_remainder(int(n), _check_fractions(fractions))
    order = np.random.default_rng(_check_seed(seed)).permutation(int(n))
    bounds = np.cumsum(sizes)[:-1]
    return {name: np.sort(part).astype(np.int64) for name, part in zip(SPLIT_NAMES, np.split(order, bounds))}


def per_user_split(
    users: np.ndarray, fractions: Sequence[float] = (0.8, 0.1, 0.1), *, seed: int
) -> dict[str, np.ndarray]:
    """Split each user's interactions separately, so every user is seen in training.

    Each user's interactions are shuffled. A user with ``k >= 3`` interactions gets
    ``max(1, floor(k * f_valid))`` in valid and ``max(1, floor(k * f_test))`` in
    test, the rest in train; should that leave train empty (tiny ``k`` with large
    valid/test fractions) the larger of valid and test gives one back, so every
    part keeps at least one. Users with fewer than 3 interactions go entirely to train.

    Args:
        users: (N,) user index of each interaction.
        fractions: positive (train, valid, test) fractions summing to 1.
        seed: non-negative seed of the shuffle.

    Returns:
        ``{"train", "valid", "test"}`` -> sorted int64 index arrays into ``users``.

    Example:
        >>> parts = per_user_split(np.array([0] * 10 + [1] * 2), seed=0)
        >>> [len(parts[k]) for k in ("train", "valid", "test")]
        [10, 1, 1]
    """
    users = np.asarray(users)
    if users.ndim != 1 or (users.size and not np.issubdtype(users.dtype, np.integer)):
        raise DataError(f"users must be a 1-d integer array, got shape {users.shape} and dtype {users.dtype}")
    _, f_valid, f_test = _check_fractions(fractions)
    rng = np.random.default_rng(_check_seed(seed))
    shuffled = rng.permutation(len(users))
    # A stable sort by user keeps the random order within each user's group.
    order = shuffled[np.argsort(users[shuffled], kind="stable")]
    grouped = users[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]]) if len(users) else np.empty(0, np.int64)
    counts = np.diff(np.r_[starts, len(users)])
    n_valid = np.maximum(1, np.floor(counts * f_valid).astype(np.int64))
    n_test = np.maximum(1, np.floor(counts * f_test).astype(np.int64))
    while np.any(over := (counts >= 3) & (counts - n_valid - n_test < 1)):
        valid_larger = n_valid >= n_test
        n_valid = np.where(over & valid_larger, n_valid - 1, n_valid)
        n_test = np.where(over & ~valid_larger, n_test - 1, n_test)
    small = counts < 3
    n_valid[small] = 0
    n_test[small] = 0
    rank = np.arange(len(users)) - np.repeat(starts, counts)
    n_train_each = np.repeat(counts - n_valid - n_test, counts)
    n_valid_each = np.repeat(n_valid, counts)
    part = np.where(rank < n_train_each, 0, np.where(rank < n_train_each + n_valid_each, 1, 2))
    return {name: np.sort(order[part == k]).astype(np.int64) for k, name in enumerate(SPLIT_NAMES)}


def save_split(split: dict[str, np.ndarray], path: str | Path) -> Path:
    """Write a split to ``path`` (``.npz``) so a run directory records exactly which rows were used.

    Example:
        >>> p = save_split(random_split(5, seed=1), "/tmp/split.npz")
        >>> load_split(p)["train"].dtype
        dtype('int64')
    """
    missing = [name for name in SPLIT_NAMES if name not in split]
    if missing:
        raise DataError(f"split lacks parts {missing}; expected keys {list(SPLIT_NAMES)}")
    path = Path(path)
    # Any: numpy's stub types **kwds against its keyword allow_pickle (bool) too, which no split name is
    arrays: dict[str, Any] = {name: np.asarray(split[name], np.int64) for name in SPLIT_NAMES}
    np.savez_compressed(path, **arrays)
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def load_split(path: str | Path) -> dict[str, np.ndarray]:
    """Read a split written by :func:`save_split`."""
    with np.load(Path(path)) as stored:
        missing = [name for name in SPLIT_NAMES if name not in stored.files]
        if missing:
            raise DataError(f"{path} lacks split parts {missing}")
        return {name: stored[name].astype(np.int64) for name in SPLIT_NAMES}

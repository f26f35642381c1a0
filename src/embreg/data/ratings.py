"""User-item interactions with contiguous 0-based indices and their original labels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from embreg.errors import DataError


def encode_labels(labels: np.ndarray, vocabulary: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Map labels (ints or strings) to 0-based indices.

    Args:
        labels: (N,) original ids.
        vocabulary: index -> label; when None it is the sorted distinct labels.

    Returns:
        ``(codes, vocabulary)``: (N,) int64 indices into ``vocabulary``.

    Raises:
        DataError: a label is missing from ``vocabulary`` (the first few are named).

    Example:
        >>> codes, vocab = encode_labels(np.array(["b", "a", "b"], dtype=object))
        >>> codes.tolist(), vocab.tolist()
        ([1, 0, 1], ['a', 'b'])
    """
    if vocabulary is None:
        vocabulary = np.unique(labels)
    codes = pd.Index(vocabulary).get_indexer(labels)
    unknown = codes < 0
    if unknown.any():
        sample = np.asarray(labels)[np.flatnonzero(unknown)[:5]].tolist()
        raise DataError(f"{int(unknown.sum())} labels are not in the vocabulary of {len(vocabulary)}, e.g. {sample}")
    return codes.astype(np.int64), vocabulary


@dataclass(frozen=True)
class RatingsData:
    """Interactions ``(user, item, rating[, timestamp])`` over contiguous 0-based id spaces.

    Attributes:
        users: (N,) int64 user indices in ``[0, num_users)``.
        items: (N,) int64 item indices in ``[0, num_items)``.
        ratings: (N,) float32 ratings (all ones for implicit feedback).
        timestamps: (N,) int64, or None.
        user_ids: (num_users,) original user label of each index (ints or strings).
        item_ids: (num_items,) original item label of each index.

    Example:
        >>> data = RatingsData.from_labels(np.array([10, 20]), np.array(["x", "y"], dtype=object))
        >>> len(data), data.num_users, data.item_ids.tolist()
        (2, 2, ['x', 'y'])
    """

    users: np.ndarray
    items: np.ndarray
    ratings: np.ndarray
    timestamps: np.ndarray | None
    user_ids: np.ndarray
    item_ids: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.users)
        lengths = {"items": len(self.items), "ratings": len(self.ratings)}
        if self.timestamps is not None:
            lengths["timestamps"] = len(self.timestamps)
        wrong = {k: v for k, v in lengths.items() if v != n}
        if wrong:
            raise DataError(f"users has {n} entries but {wrong}; all arrays must have the same length")
        for name, array, dtype in (
            ("users", self.users, np.int64),
            ("items", self.items, np.int64),
            ("ratings", self.ratings, np.float32),
        ):
            if array.dtype != dtype or array.ndim != 1:
                raise DataError(f"{name} must be a 1-d {np.dtype(dtype).name} array, got {array.ndim}-d {array.dtype}")
        for name, array, bound in (("users", self.users, self.num_users), ("items", self.items, self.num_items)):
            if n and (array.min() < 0 or array.max() >= bound):
                raise DataError(f"{name} indices span [{array.min()}, {array.max()}]; valid range is [0, {bound})")

    @classmethod
    def from_labels(
        cls,
        users: np.ndarray,
        items: np.ndarray,
        ratings: np.ndarray | None = None,
        timestamps: np.ndarray | None = None,
        *,
        user_ids: np.ndarray | None = None,
        item_ids: np.ndarray | None = None,
    ) -> RatingsData:
        """Build from original labels, numbering users and items by sorted label (or by given vocabularies).

        Args:
            users: (N,) user labels.
            items: (N,) item labels.
            ratings: (N,) values; None for implicit feedback (all ones).
            timestamps: (N,) integers or None.
            user_ids: index -> label vocabulary of users (e.g. from a users file); every label must be in it.
            item_ids: same for items.
        """
        user_codes, user_vocab = encode_labels(np.asarray(users), user_ids)
        item_codes, item_vocab = encode_labels(np.asarray(items), item_ids)
        values = np.ones(len(user_codes), np.float32) if ratings is None else np.asarray(ratings, np.float32)
        stamps = None if timestamps is None else np.asarray(timestamps, np.int64)
        return cls(user_codes, item_codes, values, stamps, np.asarray(user_vocab), np.asarray(item_vocab))

    @property
    def num_users(self) -> int:
        """Size of the user id space (may exceed the users that appear)."""
        return len(self.user_ids)

    @property
    def num_items(self) -> int:
        """Size of the item id space (may exceed the items that appear)."""
        return len(self.item_ids)

    def __len__(self) -> int:
        return len(self.users)

    def subset(self, indices: np.ndarray) -> RatingsData:
        """The interactions at ``indices`` (int positions or a boolean mask), keeping both id spaces.

        Example:
            >>> data = RatingsData.from_labels(np.array([1, 2, 3]), np.array([1, 1, 2]))
            >>> part = data.subset(np.array([2]))
            >>> len(part), part.num_users
            (1, 3)
        """
        index = np.asarray(indices)
        if index.size == 0:
            index = index.astype(np.int64)
        if index.dtype == bool:
            if index.shape != (len(self),):
                raise DataError(f"boolean mask has shape {index.shape}; expected ({len(self)},)")
        elif index.size and not np.issubdtype(index.dtype, np.integer):
            raise DataError(f"indices must be integers or a boolean mask, got dtype {index.dtype}")
        stamps = None if self.timestamps is None else self.timestamps[index]
        return RatingsData(
            self.users[index], self.items[index], self.ratings[index], stamps, self.user_ids, self.item_ids
        )

    def item_popularity(self) -> np.ndarray:
        """(num_items,) int64 count of interactions per item (the frequencies MD embeddings size by)."""
        return np.bincount(self.items, minlength=self.num_items).astype(np.int64)

    def user_popularity(self) -> np.ndarray:
        """(num_users,) int64 count of interactions per user."""
        return np.bincount(self.users, minlength=self.num_users).astype(np.int64)

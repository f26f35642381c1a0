"""Leave-one-out splits of time-ordered interactions for next-item recommendation, padding and sampled negatives.

The protocol is SASRec's (Kang & McAuley 2018, "Self-Attentive Sequential Recommendation", Sec. IV), as
sse-stochastic-shared-embeddings.txt Sec. 4.2 uses it: each user's interactions are ordered by time; the last item
is the test target, the second-to-last the validation target and the rest the training sequence. For the sampled
metrics each user's target is ranked against 100 items the user never interacted with. Sampled metrics can rank
models differently from full-ranking ones (Krichene & Rendle 2020, "On Sampled Metrics for Item Recommendation"),
so the evaluator reports both.

Example:
    >>> data = RatingsData.from_labels(np.array([0, 0, 0, 0]), np.array([5, 6, 7, 8]), timestamps=np.arange(4))
    >>> split = leave_one_out(data)
    >>> split.train[0].tolist(), split.valid_items.tolist(), split.test_items.tolist()
    ([0, 1], [2], [3])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from embreg.data.ratings import RatingsData
from embreg.errors import DataError

__all__ = ["SequenceSplit", "leave_one_out", "left_pad", "sampled_negatives"]

_SPLITS = ("valid", "test")
_REJECTION_ROUNDS = 4
_DENSE_BLOCK = 1 << 22  # entries of a (users, items) block in the exact fallback of sampled_negatives


@dataclass(frozen=True)
class SequenceSplit:
    """A leave-one-out split: per kept user a time-ordered training sequence, a validation and a test target.

    Row ``r`` of every per-user field belongs to user ``users[r]``; ``U = len(users)``.

    Attributes:
        users: (U,) int64 kept user ids, ascending.
        train: U int64 arrays of item ids in time order (each of length >= ``min_interactions - 2``).
        valid_items: (U,) int64 validation target (each user's second-to-last item).
        test_items: (U,) int64 test target (each user's last item).
        num_users: size of the user id space (of the ratings the split was made from).
        num_items: size of the item id space; ``num_items`` itself is the padding id (PAD).
        dropped_users: users with at least one but fewer than ``min_interactions`` interactions.
        min_interactions: the threshold the split was made with.

    Example:
        >>> split = SequenceSplit(np.array([1]), [np.array([0, 2])], np.array([3]), np.array([1]), 2, 4, 0, 3)
        >>> split.history("test")[0].tolist(), split.targets("test").tolist()
        ([0, 2, 3], [1])
    """

    users: np.ndarray
    train: list[np.ndarray]
    valid_items: np.ndarray
    test_items: np.ndarray
    num_users: int
    num_items: int
    dropped_users: int
    min_interactions: int

    def __post_init__(self) -> None:
        u = len(self.users)
        sizes = {"train": len(self.train), "valid_items": len(self.valid_items), "test_items": len(self.test_items)}
        wrong = {k: v for k, v in sizes.items() if v != u}
        if wrong:
            raise DataError(f"users has {u} entries but {wrong}; every per-user field needs one entry per user")

    def __len__(self) -> int:
        return len(self.users)

    def history(self, split: str) -> list[np.ndarray]:
        """The items each user has seen before the ``split`` target: U arrays in time order.

        ``"valid"``: the training sequence; ``"test"``: the training sequence followed by the validation item.
        """
        if split == "valid":
            return list(self.train)
        if split == "test":
            return [np.append(seq, item).astype(np.int64) for seq, item in zip(self.train, self.valid_items)]
        raise DataError(f"split={split!r} is not one of {_SPLITS}")

    def targets(self, split: str) -> np.ndarray:
        """(U,) int64 target item of each user for ``"valid"`` or ``"test"``."""
        if split == "valid":
            return self.valid_items
        if split == "test":
            return self.test_items
        raise DataError(f"split={split!r} is not one of {_SPLITS}")

    def train_item_counts(self) -> np.ndarray:
        """(num_items,) int64 occurrences of each item in the training sequences (training popularity)."""
        flat = np.concatenate(self.train) if self.train else np.zeros(0, np.int64)
        return np.bincount(flat.astype(np.int64), minlength=self.num_items).astype(np.int64)

    def record(self) -> dict[str, Any]:
        """A JSON-ready summary for ``split.json``."""
        return {
            "kind": "leave-one-out",
            "kept_users": len(self.users),
            "dropped_users": int(self.dropped_users),
            "min_interactions": int(self.min_interactions),
            "num_users": int(self.num_users),
            "num_items": int(self.num_items),
            "interactions": {
                "train": int(sum(len(seq) for seq in self.train)),
                "valid": len(self.valid_items),
                "test": len(self.test_items),
            },
        }


def leave_one_out(ratings: RatingsData, *, min_interactions: int = 3) -> SequenceSplit:
    """Split each user's time-ordered interactions: last -> test, second-to-last -> validation, rest -> training.

    Interactions are ordered by timestamp; ties keep the order of the rows (a stable sort). Users with fewer than
    ``min_interactions`` interactions are dropped and counted in ``dropped_users`` (users without any interaction
    are neither kept nor counted). Repeated items are kept as they are.

    Args:
        ratings: interactions with ``timestamps``.
        min_interactions: least interactions a user needs to be kept (>= 3: one each for train, valid and test).

    Returns:
        a :class:`SequenceSplit` over the id spaces of ``ratings``.

    Raises:
        DataError: ``ratings`` has no timestamps, or ``min_interactions < 3``.

    Example:
        >>> data = RatingsData.from_labels(
        ...     np.array([0, 0, 0, 1]), np.array([1, 2, 3, 1]), timestamps=np.array([3, 1, 2, 1])
        ... )
        >>> split = leave_one_out(data)
        >>> split.users.tolist(), split.train[0].tolist(), split.test_items.tolist(), split.dropped_users
        ([0], [1], [0], 1)
    """
    if isinstance(min_interactions, bool) or not isinstance(min_interactions, (int, np.integer)):
        raise DataError(f"min_interactions={min_interactions!r} must be an integer >= 3")
    if min_interactions < 3:
        raise DataError(
            f"min_interactions={min_interactions} is too small: leave-one-out needs >= 3 interactions per user "
            "(one each for training, validation and test)"
        )
    if ratings.timestamps is None:
        raise DataError(
            "leave-one-out needs the time order of interactions, but these ratings have no timestamps; "
            "name the timestamp column with data.timestamp_col"
        )
    n = len(ratings)
    order = np.lexsort((np.arange(n), ratings.timestamps, ratings.users))
    users, items = ratings.users[order], ratings.items[order].astype(np.int64)
    counts = np.bincount(users, minlength=ratings.num_users)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    kept = np.flatnonzero(counts >= min_interactions).astype(np.int64)
    dropped = int(np.count_nonzero((counts > 0) & (counts < min_interactions)))
    ends = starts[kept] + counts[kept]
    train = [items[s : e - 2] for s, e in zip(starts[kept].tolist(), ends.tolist())]
    return SequenceSplit(
        users=kept,
        train=train,
        valid_items=items[ends - 2],
        test_items=items[ends - 1],
        num_users=ratings.num_users,
        num_items=ratings.num_items,
        dropped_users=dropped,
        min_interactions=int(min_interactions),
    )


def left_pad(sequences: list[np.ndarray], max_len: int, pad: int) -> torch.Tensor:
    """The last ``max_len`` items of each sequence, left-padded with ``pad``: the newest item is at column -1.

    Args:
        sequences: U 1-d integer arrays (may be empty).
        max_len: columns of the result (>= 1).
        pad: the padding id (``num_items``).

    Returns:
        (U, max_len) int64 tensor.

    Example:
        >>> left_pad([np.array([1, 2, 3]), np.array([4])], max_len=2, pad=9).tolist()
        [[2, 3], [9, 4]]
    """
    if isinstance(max_len, bool) or not isinstance(max_len, (int, np.integer)) or max_len < 1:
        raise DataError(f"max_len={max_len!r} must be a positive integer")
    out = np.full((len(sequences), int(max_len)), pad, dtype=np.int64)
    if not sequences:
        return torch.from_numpy(out)
    lengths = np.array([len(seq) for seq in sequences], dtype=np.int64)
    flat = np.concatenate([np.asarray(seq, dtype=np.int64).reshape(-1) for seq in sequences])
    take = np.minimum(lengths, max_len)
    total = int(take.sum())
    ends = np.cumsum(lengths)
    first = np.cumsum(take) - take  # position in the kept values where each row starts
    within = np.arange(total) - np.repeat(first, take)
    rows = np.repeat(np.arange(len(sequences)), take)
    cols = max_len - np.repeat(take, take) + within
    out[rows, cols] = flat[np.repeat(ends - take, take) + within]
    return torch.from_numpy(out)


def _check_weights(weights: np.ndarray | None, num_items: int) -> np.ndarray:
    if weights is None:
        return np.ones(num_items, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (num_items,):
        raise DataError(f"weights has shape {w.shape}; expected ({num_items},), one weight per item")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise DataError("weights must be finite and non-negative (items of weight 0 are never drawn)")
    if w.sum() <= 0:
        raise DataError("weights are all zero; at least one item needs a positive weight")
    return w


def _first_distinct_valid(candidates: np.ndarray, valid: np.ndarray, num_items: int) -> np.ndarray:
    """Mark, per row, the valid entries (item ids < ``num_items``) that are the first occurrence of their value."""
    rows, cols = candidates.shape
    # invalid entries get a value of their own (num_items + column), so they never hide a valid one
    values = np.where(valid, candidates, num_items + np.arange(cols))
    keys = (np.arange(rows)[:, None] * (num_items + cols) + values).reshape(-1)
    order = np.argsort(keys, kind="stable")  # equal keys stay in column order
    ordered = keys[order]
    first = np.ones(order.size, dtype=bool)
    first[order[1:]] = ordered[1:] != ordered[:-1]
    return first.reshape(rows, cols) & valid


def _rejection(
    rows: np.ndarray,
    result: np.ndarray,
    n: int,
    rng: np.random.Generator,
    cdf: np.ndarray,
    last_positive: int,
    seen_keys: np.ndarray,
    accept: np.ndarray,
    num_items: int,
) -> np.ndarray:
    """Fill ``result[rows]`` by drawing items from ``cdf`` and rejecting seen and repeated ones; the unfilled rows.

    Keeping the first ``n`` accepted draws in draw order is sampling without replacement proportional to the
    weights among each user's eligible items.
    """
    filled = np.zeros(result.shape[0], dtype=np.int64)
    pending = rows
    for _ in range(_REJECTION_ROUNDS):
        if pending.size == 0:
            break
        need = (n - filled[pending]) / accept[pending]
        m = int(min(np.ceil(np.max(need) * 1.25) + 8, 8 * n + 64))
        draws = np.searchsorted(cdf, rng.random((pending.size, m)) * cdf[-1], side="right")
        draws = np.minimum(draws, last_positive)
        candidates = np.concatenate([result[pending], draws], axis=1)
        keys = pending[:, None] * num_items + candidates
        at = np.minimum(np.searchsorted(seen_keys, keys), seen_keys.size - 1)
        keep = _first_distinct_valid(candidates, (candidates >= 0) & (seen_keys[at] != keys), num_items)
        slot = np.cumsum(keep, axis=1)
        keep &= slot <= n
        r, c = np.nonzero(keep)
        block = np.full((pending.size, n), -1, dtype=np.int64)
        block[r, slot[r, c] - 1] = candidates[r, c]
        result[pending] = block
        filled[pending] = keep.sum(axis=1)
        pending = pending[filled[pending] < n]
    return pending


def _gumbel_top_k(
    rows: np.ndarray, n: int, rng: np.random.Generator, w: np.ndarray, seen_rows: np.ndarray, seen_items: np.ndarray
) -> np.ndarray:
    """(len(rows), n) exact draws without replacement: top-n of log(w) + Gumbel noise (Efraimidis & Spirakis)."""
    num_items = w.size
    keys = np.where(w > 0, np.log(np.where(w > 0, w, 1.0)), -np.inf) + rng.gumbel(size=(rows.size, num_items))
    mask = np.isin(seen_rows, rows)
    keys[np.searchsorted(rows, seen_rows[mask]), seen_items[mask]] = -np.inf
    top = np.argpartition(-keys, n - 1, axis=1)[:, :n]
    return np.take_along_axis(top, np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1), axis=1)


def sampled_negatives(
    split: SequenceSplit, *, n: int = 100, seed: int, weights: np.ndarray | None = None
) -> torch.Tensor:
    """Per kept user, ``n`` distinct items the user never interacted with (in training, validation or test).

    Items are drawn without replacement, uniformly (``weights=None``) or with probability proportional to
    ``weights`` among the eligible items not drawn yet (items of weight 0 are never drawn). The draw is seeded
    (``numpy.random.default_rng(seed)``), so every model is evaluated against the same negatives. Sampling is
    vectorised rejection over all users, with an exact Gumbel-top-k draw for the few users rejection does not fill
    quickly (when eligible items are scarce). SASRec (Kang & McAuley 2018, Sec. IV) ranks each target against 100
    uniform negatives; see Krichene & Rendle 2020 for how sampled metrics can mislead.

    Args:
        split: a leave-one-out split.
        n: negatives per user (>= 1).
        seed: non-negative seed.
        weights: (num_items,) non-negative sampling weights (e.g. ``split.train_item_counts()``), or None.

    Returns:
        (U, n) int64 tensor; row ``r`` belongs to user ``split.users[r]``.

    Raises:
        DataError: a user has fewer than ``n`` eligible items (named), or bad ``n``, ``seed`` or ``weights``.

    Example:
        >>> split = SequenceSplit(np.array([0]), [np.array([0])], np.array([1]), np.array([2]), 1, 5, 0, 3)
        >>> sorted(sampled_negatives(split, n=2, seed=0)[0].tolist())
        [3, 4]
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise DataError(f"n={n!r} must be a positive integer")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"seed={seed!r} must be a non-negative integer")
    n = int(n)
    num_items = split.num_items
    w = _check_weights(weights, num_items)
    u = len(split.users)
    if u == 0:
        return torch.zeros((0, n), dtype=torch.int64)

    # every (row, item) the user interacted with, as sorted unique keys row * num_items + item
    train_lengths = np.array([len(seq) for seq in split.train], dtype=np.int64)
    seen_items = np.concatenate([*split.train, split.valid_items, split.test_items]).astype(np.int64)
    seen_rows = np.concatenate([np.repeat(np.arange(u), train_lengths), np.arange(u), np.arange(u)])
    seen_keys = np.sort(seen_rows * num_items + seen_items)
    seen_keys = seen_keys[np.concatenate([[True], seen_keys[1:] != seen_keys[:-1]])]
    seen_rows, seen_items = seen_keys // num_items, seen_keys % num_items

    positive = w > 0
    eligible = int(positive.sum()) - np.bincount(seen_rows, weights=positive[seen_items], minlength=u).astype(np.int64)
    short = np.flatnonzero(eligible < n)
    if short.size:
        r = int(short[0])
        raise DataError(
            f"user {int(split.users[r])} has only {int(eligible[r])} items it never interacted with (and of positive "
            f"weight), fewer than n={n}; {short.size} user(s) are short: lower n or drop such users"
        )

    rng = np.random.default_rng(int(seed))
    cdf = np.cumsum(w)
    last_positive = int(np.flatnonzero(positive)[-1])
    seen_mass = np.bincount(seen_rows, weights=w[seen_items], minlength=u)
    accept = np.clip(1.0 - seen_mass / cdf[-1], 1e-12, 1.0)  # chance that one draw is not a seen item

    result = np.full((u, n), -1, dtype=np.int64)
    chunk = max(1, _DENSE_BLOCK // (9 * n + 64))
    for start in range(0, u, chunk):
        rows = np.arange(start, min(start + chunk, u))
        pending = _rejection(rows, result, n, rng, cdf, last_positive, seen_keys, accept, num_items)
        if pending.size:
            result[pending] = _gumbel_top_k(pending, n, rng, w, seen_rows, seen_items)
    return torch.from_numpy(result)

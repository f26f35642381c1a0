"""Duplicate interactions in a user's file: refused by default, or resolved before any split.

Two rows of a ratings file with the same (user, item) would land on both sides of a random or per-user split
(the test pair is then a training pair, and a ranking task excludes every test item as already seen). Next-item
data may hold one item twice for a user (consumed again later), so there a duplicate is the same user, item *and
timestamp*. Policies:

=========  ==========================================================================================
``error``  the default: a :class:`~embreg.errors.DataError` with the count and the first few duplicates
           with their line numbers (``row N`` for parquet)
``first``  keep the first row of each duplicate group (file order)
``last``   keep the last row of each group (at its own position in the file)
``mean``   one row per group at the first row's position (and timestamp) holding the group's mean
           rating; refused for rows with no value (implicit feedback, next-item data), where a mean means
           nothing
=========  ==========================================================================================

Example:
    >>> keys = [np.array([1, 1, 2]), np.array([7, 7, 7])]
    >>> kept, values = resolve_duplicates(keys, np.array([4.0, 2.0, 5.0]), "mean", lambda i: f"line {i + 2}")
    >>> kept.tolist(), values.tolist()
    ([0, 2], [3.0, 5.0])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from embreg.errors import DataError

__all__ = ["DUPLICATE_POLICIES", "resolve_duplicates", "check_duplicate_policy"]

DUPLICATE_POLICIES = ("error", "first", "last", "mean")
_SHOWN = 5


def check_duplicate_policy(policy: str, has_values: bool, key: str = "duplicates") -> None:
    """Raises :class:`DataError` for an unknown policy, or ``mean`` on rows that hold no value.

    Example:
        >>> check_duplicate_policy("mean", has_values=False)
        Traceback (most recent call last):
        ...
        embreg.errors.DataError: duplicates='mean' averages ratings, but these rows hold none (implicit feedback or next-item data); use 'first' or 'last'
    """
    if policy not in DUPLICATE_POLICIES:
        raise DataError(f"{key}={policy!r} is not a duplicate policy; choose one of {', '.join(DUPLICATE_POLICIES)}")
    if policy == "mean" and not has_values:
        raise DataError(
            f"{key}='mean' averages ratings, but these rows hold none (implicit feedback or next-item data); "
            "use 'first' or 'last'"
        )


def resolve_duplicates(
    keys: Sequence[np.ndarray],
    values: np.ndarray | None,
    policy: str,
    where: Callable[[int], str],
    *,
    names: Sequence[str] = ("user", "item"),
    source: str = "",
) -> tuple[np.ndarray, np.ndarray | None]:
    """The rows to keep (and their values) when rows with equal ``keys`` are duplicates.

    Args:
        keys: arrays of length N whose row-wise tuple identifies an interaction (user and item labels, and the
            timestamp for next-item data).
        values: (N,) ratings, or None for rows without a value.
        policy: one of :data:`DUPLICATE_POLICIES` (see the module docstring).
        where: row position -> its place in the file for messages (``"line 7"``).
        names: the name of each key, for messages.
        source: the file, prefixed to messages.

    Returns:
        ``(kept, values)``: sorted int64 positions of the rows kept, and their values (group means for
        ``mean``; None when ``values`` is None). Without duplicates every row is kept.

    Raises:
        DataError: duplicates under ``error`` (their count and the first few with their positions); an unknown
            policy; ``mean`` without values.
    """
    check_duplicate_policy(policy, values is not None)
    n = len(keys[0])
    frame = pd.DataFrame({f"k{i}": pd.Series(np.asarray(k), dtype=object) for i, k in enumerate(keys)})
    later = frame.duplicated(keep="first").to_numpy()
    if not later.any():
        return np.arange(n, dtype=np.int64), values
    groups = frame.groupby(list(frame.columns), sort=False, dropna=False).ngroup().to_numpy()
    if policy == "error":
        raise DataError(_message(keys, groups, later, where, names, source, values is not None))
    if policy == "last":
        kept = np.flatnonzero(~frame.duplicated(keep="last").to_numpy()).astype(np.int64)
        return kept, None if values is None else values[kept]
    kept = np.flatnonzero(~later).astype(np.int64)
    if policy == "first" or values is None:
        return kept, None if values is None else values[kept]
    sums = np.bincount(groups, weights=np.asarray(values, np.float64))
    counts = np.bincount(groups)
    means = (sums / counts)[groups[kept]]
    return kept, means.astype(np.asarray(values).dtype)


def _message(
    keys: Sequence[np.ndarray],
    groups: np.ndarray,
    later: np.ndarray,
    where: Callable[[int], str],
    names: Sequence[str],
    source: str,
    has_values: bool,
) -> str:
    repeated = np.unique(groups[later])
    shown: list[tuple[int, str]] = []
    for group in groups[np.flatnonzero(later)]:
        if len(shown) == _SHOWN:
            break
        if any(group == g for g, _ in shown):
            continue
        rows = np.flatnonzero(groups == group)
        label = ", ".join(f"{name} {_plain(keys[k][rows[0]])!r}" for k, name in enumerate(names))
        shown.append((group, f"({label}) at {_places([where(int(r)) for r in rows[:4]], len(rows) > 4)}"))
    key = "(" + ", ".join(names) + ")"
    prefix = f"{source}: " if source else ""
    more = f"; {len(repeated) - len(shown)} more" if len(repeated) > len(shown) else ""
    return (
        f"{prefix}{int(later.sum())} duplicate {key} rows: {len(repeated)} {key} occur more than once, and a "
        f"split would put one on both sides: {'; '.join(text for _, text in shown)}{more}. Remove them, or set "
        f"duplicates (data.duplicates in a recipe) to {'first, last or mean' if has_values else 'first or last'}"
    )


def _plain(value: object) -> object:
    """A numpy scalar as its Python value (``1``, not ``np.int64(1)``, in messages)."""
    return value.item() if isinstance(value, np.generic) else value


def _places(places: list[str], more: bool) -> str:
    """``["line 2", "line 9"]`` -> ``"lines 2, 9"`` (``, ...`` when there are more)."""
    words = {place.split(" ", 1)[0] for place in places}
    tail = ", ..." if more else ""
    if len(words) == 1 and all(" " in place for place in places):
        return f"{words.pop()}s " + ", ".join(place.split(" ", 1)[1] for place in places) + tail
    return ", ".join(places) + tail

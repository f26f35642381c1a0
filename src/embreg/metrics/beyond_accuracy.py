"""Beyond-accuracy metrics of top-k recommendation lists: what a model recommends, not whether it hits.

The definitions are RecBole's (``recbole/evaluator/metrics.py``: ``ItemCoverage``, ``AveragePopularity``,
``GiniIndex``, ``TailPercentage``), so readings compare with RecBole's. With ``L_u`` the top-k list of user ``u``
over the evaluated users ``U``, ``I`` the catalogue and ``c(i)`` the number of training interactions of item ``i``:

* ``coverage@k = |union_u L_u[:k]| / |I|`` (catalogue coverage);
* ``avg_popularity@k = mean_u (1/k) sum_{i in L_u[:k]} c(i)``;
* ``gini@k = sum_{j=1}^{m} (2 (|I| - m + j) - |I| - 1) P_(j) / (|I| * |U| k)``, with ``P_(1) <= ... <= P_(m)``
  how often each of the ``m`` recommended items appears in the lists (items never recommended count 0 and sit at
  the bottom); 0 when every item is recommended equally often, near 1 when a few items take every slot;
* ``tail_percentage@k = mean_u (1/k) |L_u[:k] & T|``, ``T`` the long tail: the ``max(floor(ratio * n), 1)`` least
  interacted items among the ``n`` items seen in training (ties by item id), ``ratio`` 0.1 by default as in
  RecBole; with ``ratio > 1``, the items with at most ``ratio`` training interactions.

These show what SSE and mixed-dimension embeddings do to popular versus rare items (mixed-dimension-embeddings.txt
argues about exactly this trade-off).

Example:
    >>> import numpy as np
    >>> topk = np.array([[0, 1], [0, 2]])
    >>> counts = np.array([10, 5, 1, 0])
    >>> m = beyond_accuracy_metrics(topk, counts, ks=(2,))
    >>> m["coverage@2"], m["avg_popularity@2"], m["tail_percentage@2"]
    (0.75, 6.5, 0.25)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from embreg.errors import EmbregError

__all__ = [
    "item_coverage",
    "average_popularity",
    "gini_index",
    "tail_items",
    "tail_percentage",
    "beyond_accuracy_metrics",
    "beyond_accuracy_names",
    "BEYOND_ACCURACY",
]


def _lists(topk: np.ndarray | torch.Tensor, num_items: int) -> np.ndarray:
    lists = topk.detach().cpu().numpy() if isinstance(topk, torch.Tensor) else np.asarray(topk)
    if lists.ndim != 2 or lists.shape[1] < 1:
        raise EmbregError(f"top-k lists must be a (U, k) array with k >= 1, got shape {lists.shape}")
    if lists.size and (lists.min() < 0 or lists.max() >= num_items):
        raise EmbregError(f"top-k lists hold item ids in [{lists.min()}, {lists.max()}]; valid range [0, {num_items})")
    return lists.astype(np.int64)


def item_coverage(topk: np.ndarray | torch.Tensor, num_items: int) -> float:
    """Share of the catalogue that appears in at least one list (RecBole ``ItemCoverage``)."""
    lists = _lists(topk, num_items)
    return float(np.unique(lists).size / num_items)


def average_popularity(topk: np.ndarray | torch.Tensor, item_counts: np.ndarray) -> float:
    """Mean training interaction count of the recommended items, per list then over users (RecBole
    ``AveragePopularity``)."""
    counts = np.asarray(item_counts, dtype=np.float64)
    lists = _lists(topk, len(counts))
    return float(counts[lists].mean(axis=1).mean()) if len(lists) else float("nan")


def gini_index(topk: np.ndarray | torch.Tensor, num_items: int) -> float:
    """Gini index of how often each item is recommended (RecBole ``GiniIndex``; smaller is more even)."""
    lists = _lists(topk, num_items)
    if not lists.size:
        return float("nan")
    appearances = np.sort(np.unique(lists, return_counts=True)[1]).astype(np.float64)
    m = appearances.size
    rank = np.arange(num_items - m + 1, num_items + 1, dtype=np.float64)
    return float(np.sum((2 * rank - num_items - 1) * appearances) / lists.size / num_items)


def tail_items(item_counts: np.ndarray, ratio: float = 0.1) -> np.ndarray:
    """Boolean mask over items: the long tail ``T`` of the module docstring."""
    counts = np.asarray(item_counts, dtype=np.int64)
    if ratio <= 0:
        raise EmbregError(f"tail ratio={ratio} must be > 0 (a share in (0, 1], or a count threshold > 1)")
    tail = np.zeros(len(counts), bool)
    if ratio > 1:
        tail[(counts > 0) & (counts <= ratio)] = True
        return tail
    seen = np.flatnonzero(counts > 0)
    order = seen[np.lexsort((seen, counts[seen]))]
    tail[order[: max(int(len(seen) * ratio), 1)]] = True
    return tail


def tail_percentage(topk: np.ndarray | torch.Tensor, item_counts: np.ndarray, ratio: float = 0.1) -> float:
    """Share of recommended items in the long tail, per list then over users (RecBole ``TailPercentage``)."""
    tail = tail_items(item_counts, ratio)
    lists = _lists(topk, len(tail))
    return float(tail[lists].mean(axis=1).mean()) if len(lists) else float("nan")


BEYOND_ACCURACY = ("coverage", "avg_popularity", "gini", "tail_percentage")
"""The names of the beyond-accuracy metrics, each reported per cut-off as ``<name>@<k>``."""


def beyond_accuracy_names(ks: Sequence[int]) -> tuple[str, ...]:
    """The keys :func:`beyond_accuracy_metrics` returns for the cut-offs ``ks``.

    Example:
        >>> beyond_accuracy_names((10,))
        ('coverage@10', 'avg_popularity@10', 'gini@10', 'tail_percentage@10')
    """
    return tuple(f"{name}@{k}" for k in ks for name in BEYOND_ACCURACY)


def beyond_accuracy_metrics(
    topk: np.ndarray | torch.Tensor, item_counts: np.ndarray, ks: Sequence[int] = (10,), tail_ratio: float = 0.1
) -> dict[str, float]:
    """``coverage@k``, ``avg_popularity@k``, ``gini@k`` and ``tail_percentage@k`` for each ``k`` in ``ks``.

    Args:
        topk: ``(U, K)`` item indices, best first, one row per evaluated user; ``K >= max(ks)``.
        item_counts: ``(I,)`` training interactions of each item (its length is the catalogue size).
        ks: cut-offs.
        tail_ratio: the long tail's share (or count threshold), see the module docstring.
    """
    counts = np.asarray(item_counts)
    lists = _lists(topk, len(counts))
    out: dict[str, float] = {}
    for k in ks:
        if k > lists.shape[1]:
            raise EmbregError(f"k={k} exceeds the lists' length {lists.shape[1]}")
        head = lists[:, :k]
        out[f"coverage@{k}"] = item_coverage(head, len(counts))
        out[f"avg_popularity@{k}"] = average_popularity(head, counts)
        out[f"gini@{k}"] = gini_index(head, len(counts))
        out[f"tail_percentage@{k}"] = tail_percentage(head, counts, tail_ratio)
    return out

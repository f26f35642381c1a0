"""Functional evaluation metrics: rating error (RMSE, MAE) and full-ranking top-k metrics for implicit feedback.

Tensors in, Python floats out. Ranking evaluation has two steps so that scoring can be done in user blocks:
:func:`topk_excluding` ranks every item for each user, skipping the items the user has already seen, and
:func:`ranking_metrics` scores those rankings against the held-out relevant items.

Example:
    >>> import torch
    >>> scores = torch.tensor([[0.9, 0.8, 0.1], [0.2, 0.3, 0.7]])
    >>> topk = topk_excluding(scores, torch.tensor([0]), torch.tensor([0]), k=2)
    >>> topk.tolist()
    [[1, 2], [2, 1]]
    >>> ranking_metrics(topk, torch.tensor([0, 1]), torch.tensor([1, 0]), num_items=3, ks=(1,))
    {'precision@1': 0.5, 'recall@1': 0.5, 'ndcg@1': 0.5, 'hit@1': 0.5}
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from embreg.errors import EmbregError

__all__ = ["rmse", "mae", "topk_excluding", "ranking_metrics"]


def _paired(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``pred - target`` in float64, after checking the shapes match exactly (no silent broadcasting)."""
    if pred.shape != target.shape:
        raise EmbregError(
            f"pred and target must have the same shape, got {tuple(pred.shape)} and {tuple(target.shape)} "
            "(squeeze a trailing dimension of size 1 if that is the difference)"
        )
    if pred.numel() == 0:
        raise EmbregError("pred and target are empty; need at least one element")
    return pred.detach().double() - target.detach().double()


def rmse(pred: torch.Tensor, target: torch.Tensor) -> float:
    """Root mean squared error, computed in float64.

    Args:
        pred: predictions, any shape ``(...)``.
        target: targets, the same shape.

    Example:
        >>> rmse(torch.tensor([1.0, 3.0]), torch.tensor([2.0, 2.0]))
        1.0
    """
    return math.sqrt(_paired(pred, target).pow(2).mean().item())


def mae(pred: torch.Tensor, target: torch.Tensor) -> float:
    """Mean absolute error, computed in float64.

    Args:
        pred: predictions, any shape ``(...)``.
        target: targets, the same shape.

    Example:
        >>> mae(torch.tensor([1.0, 4.0]), torch.tensor([2.0, 2.0]))
        1.5
    """
    return _paired(pred, target).abs().mean().item()


def _check_pairs(users: torch.Tensor, items: torch.Tensor, num_users: int, num_items: int, what: str) -> None:
    """Check a list of (user, item) pairs: 1-D integer tensors of equal length with ids in range."""
    for name, ids, bound in ((f"{what}_users", users, num_users), (f"{what}_items", items, num_items)):
        if ids.dim() != 1 or ids.dtype not in (torch.int64, torch.int32):
            raise EmbregError(f"{name} must be a 1-D integer tensor, got shape {tuple(ids.shape)} dtype {ids.dtype}")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= bound):
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            raise EmbregError(f"{name} holds id {bad}, outside the valid range [0, {bound - 1}]")
    if users.numel() != items.numel():
        raise EmbregError(f"{what}_users and {what}_items differ in length: {users.numel()} vs {items.numel()}")


def topk_excluding(
    scores: torch.Tensor, exclude_users: torch.Tensor, exclude_items: torch.Tensor, k: int
) -> torch.Tensor:
    """Top-k items per user after removing excluded (user, item) pairs, e.g. the training interactions.

    Excluded scores are set to ``-inf`` on a copy, so they rank last; when a user has fewer than ``k`` allowed
    items the remaining slots hold excluded items. Ties are broken by the lower item index (a stable sort),
    so the result is deterministic on every device. The sort costs ``O(U I log I)``; score users in blocks
    for large catalogues.

    Args:
        scores: ``(U, I)`` floating scores, higher is better; not modified. NaN is rejected.
        exclude_users: ``(E,)`` row indices in ``[0, U)``.
        exclude_items: ``(E,)`` item indices in ``[0, I)``.
        k: items per user, ``1 <= k <= I``.

    Returns:
        ``(U, k)`` int64 item indices, best first.

    Example:
        >>> s = torch.tensor([[1.0, 1.0, 0.5, 1.0]])
        >>> topk_excluding(s, torch.tensor([0]), torch.tensor([1]), k=3).tolist()
        [[0, 3, 2]]
    """
    if scores.dim() != 2 or not scores.is_floating_point():
        raise EmbregError(
            f"scores must be a 2-D floating tensor (U, I), got shape {tuple(scores.shape)} {scores.dtype}"
        )
    num_users, num_items = scores.shape
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= num_items:
        raise EmbregError(f"k must be an int in [1, {num_items}] (the number of items), got {k!r}")
    _check_pairs(exclude_users, exclude_items, num_users, num_items, "exclude")
    if torch.isnan(scores).any():
        raise EmbregError("scores contain NaN; rankings would depend on where the NaNs are")
    masked = scores.detach().clone()
    masked[exclude_users.long(), exclude_items.long()] = float("-inf")
    # A stable descending sort keeps equal scores in index order; torch.topk gives no tie-breaking guarantee.
    order = torch.sort(masked, dim=1, descending=True, stable=True).indices
    return order[:, :k].contiguous()


def _discounts(length: int, device: torch.device) -> torch.Tensor:
    """``1 / log2(rank + 1)`` for ranks ``1..length``, float64."""
    return 1.0 / torch.log2(torch.arange(2, length + 2, device=device, dtype=torch.float64))


def ranking_metrics(
    topk: torch.Tensor,
    relevant_users: torch.Tensor,
    relevant_items: torch.Tensor,
    num_items: int,
    ks: Sequence[int] = (1, 5, 10),
) -> dict[str, float]:
    """Precision, recall, NDCG and hit rate at each cut-off, averaged over users with a relevant item.

    For user ``u`` with relevant set ``R_u`` and ranked list ``L_u``: ``precision@k = |L_u[:k] & R_u| / k``,
    ``recall@k = |L_u[:k] & R_u| / |R_u|``, ``hit@k = 1[|L_u[:k] & R_u| > 0]`` and, with binary relevance,
    ``ndcg@k = DCG@k / IDCG@k`` where ``DCG@k = sum_{r <= k, L_u[r] in R_u} 1 / log2(r + 1)`` and the ideal
    DCG places ``min(k, |R_u|)`` relevant items first. Users with no relevant item are left out of every
    average. Duplicate relevant pairs count once. Membership is looked up by binary search over sorted
    ``user * num_items + item`` keys, so memory is ``O(R + U K)`` rather than ``O(U I)``.

    Args:
        topk: ``(U, K)`` item indices per user, best first, no repeats within a row (see :func:`topk_excluding`).
        relevant_users: ``(R,)`` user (row) indices in ``[0, U)``.
        relevant_items: ``(R,)`` item indices in ``[0, num_items)``.
        num_items: size of the item id space.
        ks: cut-offs, each in ``[1, K]``.

    Returns:
        ``{"precision@k", "recall@k", "ndcg@k", "hit@k"}`` for every ``k`` in ``ks``, in that order.

    Example:
        >>> topk = torch.tensor([[2, 0, 1]])
        >>> m = ranking_metrics(topk, torch.tensor([0, 0]), torch.tensor([0, 1]), num_items=3, ks=(2,))
        >>> m["recall@2"], round(m["ndcg@2"], 4)
        (0.5, 0.3869)
    """
    if topk.dim() != 2 or topk.dtype not in (torch.int64, torch.int32):
        raise EmbregError(f"topk must be a 2-D integer tensor (U, K), got shape {tuple(topk.shape)} {topk.dtype}")
    num_users, depth = topk.shape
    if isinstance(num_items, bool) or not isinstance(num_items, int) or num_items < 1:
        raise EmbregError(f"num_items must be a positive int, got {num_items!r}")
    ks = tuple(ks)
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= depth for k in ks):
        raise EmbregError(f"ks must be a non-empty list of ints in [1, {depth}] (the columns of topk), got {ks!r}")
    _check_pairs(relevant_users, relevant_items, num_users, num_items, "relevant")
    topk = topk.long()
    if topk.numel() and (int(topk.min()) < 0 or int(topk.max()) >= num_items):
        bad = int(topk.min()) if int(topk.min()) < 0 else int(topk.max())
        raise EmbregError(f"topk holds item {bad}, outside the valid range [0, {num_items - 1}]")
    if depth > 1 and (topk.sort(dim=1).values.diff(dim=1) == 0).any():
        raise EmbregError("topk repeats an item within a row; each ranked list must hold distinct items")

    device = topk.device
    keys = torch.unique(relevant_users.long().to(device) * num_items + relevant_items.long().to(device))
    relevant_count = torch.bincount(keys // num_items, minlength=num_users).to(torch.float64)
    has_relevant = relevant_count > 0
    if not bool(has_relevant.any()):
        raise EmbregError("no user has a relevant item; ranking metrics are undefined")

    query = torch.arange(num_users, device=device).unsqueeze(1) * num_items + topk
    position = torch.searchsorted(keys, query).clamp(max=keys.numel() - 1)
    hits = (keys[position] == query).to(torch.float64)[has_relevant]  # (U', K)
    relevant_count = relevant_count[has_relevant]

    discounts = _discounts(depth, device)
    dcg_prefix = (hits * discounts).cumsum(dim=1)
    hits_prefix = hits.cumsum(dim=1)
    ideal_prefix = discounts.cumsum(dim=0)

    result: dict[str, float] = {}
    for k in ks:
        found = hits_prefix[:, k - 1]
        ideal = ideal_prefix[relevant_count.clamp(max=k).long() - 1]
        result[f"precision@{k}"] = (found / k).mean().item()
        result[f"recall@{k}"] = (found / relevant_count).mean().item()
        result[f"ndcg@{k}"] = (dcg_prefix[:, k - 1] / ideal).mean().item()
        result[f"hit@{k}"] = (found > 0).to(torch.float64).mean().item()
    return result

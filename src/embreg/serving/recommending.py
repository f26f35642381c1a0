"""``recommend`` for the ranking and next-item tasks (see :meth:`~embreg.serving.trained_run.TrainedRun.recommend`).

The same computation as the runs' full-ranking evaluation, batched over users (RecBole's ``full_sort_topk``): the
model scores every item for a block of users (``score_all`` for ranking models, ``score_next`` on the left-padded
history for next-item models), the user's own items are excluded (their score set to ``-inf``), and the top ``k``
are kept with ties broken by the lower item index (:func:`embreg.metrics.recommendation.topk_excluding`). A user with fewer
than ``k`` items left gets fewer rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from embreg.errors import ConfigError, DataError
from embreg.metrics.recommendation import topk_excluding
from embreg.serving.served_run import ServedRun

__all__ = ["recommend", "seen_items"]


def seen_items(run: ServedRun) -> list[np.ndarray]:
    """Per user index, the item indices the user already has in the run's data (ranking: every interaction;
    next-item: the whole time-ordered history, training, validation and test items; empty for dropped users)."""
    if run.task == "ranking":
        ratings = run.prepared.ratings
        order = np.argsort(ratings.users, kind="stable")
        counts = np.bincount(ratings.users, minlength=ratings.num_users)
        return np.split(ratings.items[order], np.cumsum(counts)[:-1])
    split = run.prepared.split
    out = [np.zeros(0, np.int64) for _ in range(split.num_users)]
    for row, user in enumerate(split.users.tolist()):
        out[user] = np.concatenate([split.train[row], [split.valid_items[row], split.test_items[row]]]).astype(np.int64)
    return out


@torch.no_grad()
def recommend(
    run: ServedRun,
    users: Sequence[Any] | None,
    k: int,
    include_seen: bool,
    history: Sequence[Any] | None,
    batch_size: int,
) -> pd.DataFrame:
    user_vocab, item_vocab = run.vocabularies["user"], run.vocabularies["item"]
    num_items = len(item_vocab)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= num_items:
        raise ConfigError(f"k={k!r} must be an integer in [1, {num_items}] (the run's items)")
    if batch_size < 1:
        raise ConfigError(f"batch_size={batch_size} must be >= 1")
    seen = seen_items(run)
    if history is not None:
        if run.task != "next-item":
            raise ConfigError("history= (--history) continues a sequence: it serves next-item runs only")
        if users is not None and len(users) > 1:
            raise ConfigError(f"history= (--history) is one user's history; {len(users)} users were named")
        index = user_vocab.require(list(users)) if users else np.zeros(1, np.int64)
        given = item_vocab.require(list(history))
        return _rank(run, index, [given], k, include_seen, batch_size, users if users else [""])
    if users is None:
        index = np.flatnonzero([len(s) > 0 for s in seen]).astype(np.int64)
    else:
        index = user_vocab.require(list(users))
        empty = [u for u, i in zip(users, index.tolist()) if len(seen[i]) == 0]
        if empty and run.task == "next-item":
            raise DataError(
                f"user(s) {empty[:5]} have no history in the run's split (fewer than data.min_interactions="
                f"{run.recipe.data.min_interactions} interactions); give one with history= (--history)"
            )
    labels = user_vocab.labels_of(index)
    return _rank(run, index, [seen[i] for i in index.tolist()], k, include_seen, batch_size, labels)


def _rank(
    run: ServedRun,
    users: np.ndarray,
    histories: list[np.ndarray],
    k: int,
    include_seen: bool,
    batch_size: int,
    labels: Any,
) -> pd.DataFrame:
    from embreg.data.sequences import left_pad

    num_items = len(run.vocabularies["item"])
    model: Any = run.model
    labels = np.asarray(labels)
    parts_user, parts_item, parts_rank, parts_score = [], [], [], []
    for start in range(0, len(users), batch_size):
        block = torch.from_numpy(users[start : start + batch_size]).to(run.device)
        hist = histories[start : start + batch_size]
        if run.task == "ranking":
            scores = model.score_all(block)
        else:
            inputs = left_pad(hist, run.recipe.data.max_len, num_items).to(run.device)
            scores = model.score_next({"user": block, "input": inputs})
        scores = scores.float()
        if include_seen:
            ex_rows = ex_items = torch.zeros(0, dtype=torch.long, device=scores.device)
        else:
            ex_rows = torch.repeat_interleave(torch.arange(len(hist)), torch.tensor([len(h) for h in hist]))
            ex_items = torch.from_numpy(np.concatenate(hist) if hist else np.zeros(0, np.int64)).long()
            ex_rows, ex_items = ex_rows.to(scores.device), ex_items.to(scores.device)
        top = topk_excluding(scores, ex_rows, ex_items, k)
        excluded = torch.zeros_like(scores, dtype=torch.bool)
        excluded[ex_rows, ex_items] = True
        keep = (~excluded.gather(1, top)).cpu().numpy()  # a user with fewer than k items left gets fewer rows
        top_scores = scores.gather(1, top).cpu().numpy()
        rows = np.broadcast_to(np.arange(top.shape[0])[:, None], top.shape)
        parts_user.append(labels[start + rows[keep]])
        parts_item.append(top.cpu().numpy()[keep])
        parts_rank.append(np.broadcast_to(np.arange(1, k + 1), top.shape)[keep])
        parts_score.append(top_scores[keep])
    items = run.vocabularies["item"].labels_of(np.concatenate(parts_item) if parts_item else np.zeros(0, np.int64))
    return pd.DataFrame(
        {
            "user": np.concatenate(parts_user) if parts_user else labels[:0],
            "item": items,
            "rank": np.concatenate(parts_rank) if parts_rank else np.zeros(0, np.int64),
            "score": np.concatenate(parts_score) if parts_score else np.zeros(0, np.float32),
        }
    )

"""Evaluators: ``evaluator(model, split) -> {metric: value}`` for explicit ratings and full-ranking top-k.

Evaluators rely only on the model protocol (``model(batch)`` for ratings, ``model.score_all(users)`` for
ranking), never on concrete model classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
from torch import nn

from embreg.metrics.recommendation import mae, ranking_metrics, rmse, topk_excluding
from embreg.train.device import model_device, move_batch

if TYPE_CHECKING:
    from embreg.models.protocols import RankingModel


class RatingEvaluator:
    """RMSE and MAE of predicted ratings on named splits, in eval mode, clamped to the rating range.

    Clamping predictions to ``[min_rating, max_rating]`` (the training range) is what rating predictors do at
    serving time (scikit-surprise does the same), so baselines are compared on equal terms.

    Args:
        splits: ``{split: {"user": (N,), "item": (N,), "rating": (N,)}}``.
        rating_range: ``(min_rating, max_rating)`` for clamping, or ``None`` for no clamping.
        batch_size: prediction batch size.

    Example:
        >>> from embreg.models import BiasedMF
        >>> data = {"valid": {"user": torch.tensor([0]), "item": torch.tensor([1]), "rating": torch.tensor([3.0])}}
        >>> ev = RatingEvaluator(data, rating_range=(1.0, 5.0))
        >>> sorted(ev(BiasedMF.build(2, 2, 4, global_mean=3.0), "valid"))
        ['mae', 'rmse']
    """

    def __init__(
        self,
        splits: dict[str, dict[str, torch.Tensor]],
        *,
        rating_range: tuple[float, float] | None = None,
        batch_size: int = 65536,
    ) -> None:
        self.splits = splits
        self.rating_range = rating_range
        self.batch_size = batch_size

    @property
    def split_names(self) -> list[str]:
        return list(self.splits)

    @torch.no_grad()
    def predict(self, model: nn.Module, split: str) -> torch.Tensor:
        """Clamped predictions ``(N,)`` for every example of ``split``."""
        data = self._split(split)
        was_training = model.training
        model.eval()
        device = model_device(model)
        n = data["user"].shape[0]
        parts = []
        for start in range(0, n, self.batch_size):
            batch = move_batch({k: v[start : start + self.batch_size] for k, v in data.items()}, device)
            parts.append(model(batch).predictions)
        model.train(was_training)
        predictions = torch.cat(parts).cpu()
        if self.rating_range is not None:
            predictions = predictions.clamp(*self.rating_range)
        return predictions

    def __call__(self, model: nn.Module, split: str) -> dict[str, float]:
        predictions = self.predict(model, split)
        target = self._split(split)["rating"]
        return {"rmse": rmse(predictions, target), "mae": mae(predictions, target)}

    def _split(self, split: str) -> dict[str, torch.Tensor]:
        if split not in self.splits:
            raise KeyError(f"unknown split {split!r}; this evaluator has {self.split_names}")
        return self.splits[split]


class RankingEvaluator:
    """Full-ranking top-k metrics: each user's items are ranked against all items they have not seen.

    For split ``s`` the items excluded from a user's ranking are those in the ``exclude[s]`` interactions (for
    validation: the training items; for test: training and validation items), and the relevant items are that
    split's interactions. Metrics: precision@k, recall@k, ndcg@k and hit@k for each k in ``ks``, averaged over
    users with at least one relevant item; with ``item_counts``, also the beyond-accuracy metrics of those users'
    lists (coverage@k, avg_popularity@k, gini@k, tail_percentage@k: :mod:`embreg.metrics.beyond_accuracy`).

    Args:
        num_users: users in the id space.
        num_items: items in the id space.
        relevant: ``{split: (users (R,), items (R,))}`` interactions to retrieve.
        exclude: ``{split: (users (E,), items (E,))}`` interactions never ranked for that split.
        ks: cut-offs.
        user_batch: users scored at once (memory ``user_batch * num_items`` floats).
        item_counts: ``(num_items,)`` training interactions per item, for the beyond-accuracy metrics (``None``:
            none are reported).
    """

    def __init__(
        self,
        num_users: int,
        num_items: int,
        relevant: dict[str, tuple[torch.Tensor, torch.Tensor]],
        exclude: dict[str, tuple[torch.Tensor, torch.Tensor]],
        *,
        ks: Sequence[int] = (1, 5, 10),
        user_batch: int = 4096,
        item_counts: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        missing = set(relevant) - set(exclude)
        if missing:
            raise ValueError(f"splits {sorted(missing)} have relevant items but no exclusion set")
        self.num_users = num_users
        self.num_items = num_items
        self.relevant = relevant
        self.exclude = exclude
        self.ks = tuple(ks)
        self.user_batch = user_batch
        self.item_counts = item_counts

    @property
    def split_names(self) -> list[str]:
        return list(self.relevant)

    @torch.no_grad()
    def __call__(self, model: nn.Module, split: str) -> dict[str, float]:
        if split not in self.relevant:
            raise KeyError(f"unknown split {split!r}; this evaluator has {self.split_names}")
        was_training = model.training
        model.eval()
        k = max(self.ks)
        device = model_device(model)
        ex_users, ex_items = (t.to(device) for t in self.exclude[split])
        topk_parts = []
        for start in range(0, self.num_users, self.user_batch):
            users = torch.arange(start, min(start + self.user_batch, self.num_users), device=device)
            scores = cast("RankingModel", model).score_all(users)
            in_block = (ex_users >= start) & (ex_users < start + users.numel())
            topk_parts.append(topk_excluding(scores, ex_users[in_block] - start, ex_items[in_block], k))
        model.train(was_training)
        topk = torch.cat(topk_parts).cpu()
        rel_users, rel_items = self.relevant[split]
        metrics = ranking_metrics(topk, rel_users, rel_items, self.num_items, ks=self.ks)
        if self.item_counts is not None:
            from embreg.metrics.beyond_accuracy import beyond_accuracy_metrics

            evaluated = torch.unique(rel_users.cpu())
            metrics.update(beyond_accuracy_metrics(topk[evaluated], np.asarray(self.item_counts), ks=self.ks))
        return metrics

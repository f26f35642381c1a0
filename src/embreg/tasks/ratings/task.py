"""Tasks ``rating`` (explicit ratings: RMSE/MAE) and ``ranking`` (implicit feedback: full-ranking top-k metrics).

Data: MovieLens-100k from the registry or a user's ratings file (CSV/TSV/parquet, ``data.path`` and column names).
Rating tasks split the interactions at random; ranking tasks split each user's interactions (per-user split).
Id kinds for index transforms: ``user`` and ``item``; graphs for SSE-Graph (ML-100k only): items sharing a
knowledge-graph entity (``kg``) or a genre (``genre``), users sharing an attribute (``occupation``, ...).

Example:
    >>> from embreg.recipes import load_recipe
    >>> recipe = load_recipe("mf", ["data.max_rows=1000"])
    >>> prepared = recipe.adapter.prepare(recipe)
    >>> sorted(prepared.split), prepared.ratings.num_users > 0
    (['test', 'train', 'valid'], True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from embreg.batching.batches import TensorBatches
from embreg.data import (
    NegativeSampler,
    RatingsData,
    item_graph_from_genres,
    item_graph_from_kg,
    load_ml100k,
    per_user_split,
    random_split,
    user_graph_from_attributes,
)
from embreg.data.datasets.movielens import MovieLens100k
from embreg.data.files.ratings_file import read_ratings_file
from embreg.data.graphs import DEFAULT_KG_RELATIONS
from embreg.errors import ConfigError, DataError
from embreg.sse import NeighbourGraph
from embreg.tasks import TaskAdapter, check_max_rows, check_split, register_task
from embreg.tasks.data_files import checked_file, file_record, require_split_rows, resolve_data_file
from embreg.tasks.ratings.evaluation import RankingEvaluator, RatingEvaluator

__all__ = ["RatingsDataConfig", "PreparedRatings", "RatingTask", "RankingTask", "load_interactions", "movielens_graph"]

SPLITS = ("train", "valid", "test")
RANKING_KS = (1, 5, 10)
"""The cut-offs of the ranking task's top-k metrics (``precision@k``, ``recall@k``, ``ndcg@k``, ``hit@k``)."""
TOP_K = max(RANKING_KS)
"""The largest cut-off: a ranking task needs at least this many items."""


@dataclass
class RatingsDataConfig:
    """Where the interactions come from and how they are split.

    Attributes:
        dataset: a registry name (``embreg list``); ``file`` when ``path`` is set (it replaces the dataset).
        path: a user's own ratings file (CSV/TSV/parquet) instead of a registry dataset; resolved to an absolute
            path when the recipe is loaded.
        sha256: the checksum ``path`` must have (``null``: filled in with the file's when the recipe is loaded,
            so ``config.yaml`` names the exact bytes used; see :mod:`embreg.tasks.data_files`).
        user_col, item_col, rating_col, timestamp_col: column mapping for ``path`` (``rating_col: null`` means
            implicit feedback).
        sep: field separator for text files (``null``: from the extension, else sniffed).
        duplicates: rows of ``path`` with the same (user, item): ``error`` (refused, naming their lines),
            ``first``, ``last`` or ``mean`` (mean rating; not for implicit feedback), resolved before the split
            (:mod:`embreg.data.files.duplicates`).
        split: train/valid/test fractions.
        split_seed: seed of the split (recorded in the run directory).
        min_rating: for ranking tasks, interactions with a rating below this are dropped (``null``: keep all).
        max_rows: keep only the first ``max_rows`` interactions (quick slices for tests and smoke runs).
    """

    dataset: str = "ml-100k"
    path: str | None = None
    sha256: str | None = None
    user_col: str = "user_id"
    item_col: str = "item_id"
    rating_col: str | None = "rating"
    timestamp_col: str | None = None
    sep: str | None = None
    duplicates: Literal["error", "first", "last", "mean"] = "error"
    split: list[float] = field(default_factory=lambda: [0.8, 0.1, 0.1])
    split_seed: int = 0
    min_rating: float | None = None
    max_rows: int | None = None

    def __post_init__(self) -> None:
        check_split(self.split)
        check_max_rows(self.max_rows)
        if self.duplicates == "mean" and self.rating_col is None:
            raise ConfigError(
                "data.duplicates='mean' averages ratings, but data.rating_col is null (implicit feedback): "
                "use data.duplicates=first or last"
            )
        resolve_data_file(self)


@dataclass
class PreparedRatings:
    """Interactions, their seeded split, and (for ML-100k) the side information graphs are built from.

    Attributes:
        ratings: every interaction used by the recipe.
        split: ``{"train"|"valid"|"test": index array into ratings}``.
        movielens: the full ML-100k bundle when the recipe uses it, else ``None``.
        source: the data used (``split.json``'s ``data``): the file's path, sha256 and rows, or the dataset.
    """

    ratings: RatingsData
    split: dict[str, np.ndarray]
    movielens: MovieLens100k | None = None
    source: dict[str, Any] = field(default_factory=dict)

    def part(self, name: str) -> RatingsData:
        return self.ratings.subset(self.split[name])

    def tensors(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        part = self.part(name)
        return torch.from_numpy(part.users), torch.from_numpy(part.items)


def popularity_thirds(train_items: np.ndarray, num_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks over items: the most popular items that hold the first third of the training mass, and the
    least popular ones that hold the last third (cumulative frequency, most popular first; mixed-dimension-
    embeddings.txt, Appendix H).

    Example:
        >>> popular, rare = popularity_thirds(np.array([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 5]), 6)
        >>> popular.tolist(), rare.tolist()
        ([True, False, False, False, False, False], [False, False, False, True, True, True])
    """
    counts = np.bincount(train_items, minlength=num_items).astype(np.float64)
    order = np.argsort(-counts, kind="stable")
    cumulative = np.cumsum(counts[order]) / max(counts.sum(), 1.0)
    popular, rare = np.zeros(num_items, bool), np.zeros(num_items, bool)
    popular[order[cumulative <= 1 / 3 + 1e-12]] = True
    rare[order[cumulative > 2 / 3]] = True
    return popular, rare


def load_interactions(
    data, *, rating_col: str | None, holds: str, per_timestamp: bool = False
) -> tuple[RatingsData, MovieLens100k | None, dict[str, Any]]:
    """The interactions a ``data`` section names: ``data.path`` (its columns) or ML-100k, cut to ``data.max_rows``.

    Returns ``(ratings, the ML-100k bundle or None, the data used)``; ``holds`` names what the task needs in the
    error for an unknown dataset (``"ratings"``, ``"timed interactions"``). Duplicates in a file are resolved by
    ``data.duplicates`` (the same user, item and timestamp with ``per_timestamp``) before the cut.
    """
    movielens = None
    if data.path is not None:
        described = checked_file(data)
        ratings, counts = read_ratings_file(
            data.path,
            user=data.user_col,
            item=data.item_col,
            rating=rating_col,
            timestamp=data.timestamp_col,
            sep=data.sep,
            duplicates=data.duplicates,
            duplicates_per_timestamp=per_timestamp,
        )
        source = file_record(described, counts, len(ratings), duplicates=data.duplicates)
    elif data.dataset == "ml-100k":
        movielens = load_ml100k()
        ratings = movielens.ratings
        source = {"dataset": data.dataset, "rows_read": len(ratings)}
    else:
        raise ConfigError(f"data.dataset={data.dataset!r} holds no {holds}; use 'ml-100k' or set data.path")
    if data.max_rows is not None and data.max_rows < len(ratings):
        ratings = ratings.subset(np.arange(data.max_rows))
    source["rows"] = len(ratings)
    return ratings, movielens, source


def movielens_graph(ml: MovieLens100k | None, kind: str, name: str, relations, num_ids: int) -> NeighbourGraph:
    """The SSE-Graph neighbour graph ``name`` over ML-100k's ``kind`` ids: items sharing a knowledge-graph entity
    (``kg``, over ``relations``) or a genre (``genre``); users sharing an attribute (``occupation``, ...)."""
    if ml is None:
        raise ConfigError(f"the {name!r} graph needs the ml-100k side information; it is not available with data.path")
    if kind == "item" and name == "kg":
        edges = item_graph_from_kg(ml, relations=tuple(relations or DEFAULT_KG_RELATIONS))
    elif kind == "item" and name == "genre":
        edges = item_graph_from_genres(ml)
    elif kind == "user" and name != "kg" and name != "genre":
        edges = user_graph_from_attributes(ml, by=(name,))
    else:
        raise ConfigError(f"no graph {name!r} over {kind} ids; items: kg, genre; users: occupation, gender, ...")
    return NeighbourGraph.from_edges(edges, num_ids)


class _InteractionTask(TaskAdapter):
    data_config = RatingsDataConfig
    id_kinds = ("user", "item")
    smoke_overrides = ("data.max_rows=3000", "train.epochs=1", "train.progress=false")
    train_defaults = {"epochs": 100, "batch_size": 1024, "lr": 1e-3, "optimizer": "adam", "patience": 5}
    split_kind = "random"

    def prepare(self, recipe) -> PreparedRatings:
        d = recipe.data
        ratings, movielens, source = load_interactions(d, rating_col=d.rating_col, holds="ratings")
        if self.name == "ranking" and d.min_rating is not None:
            ratings = ratings.subset(np.flatnonzero(ratings.ratings >= d.min_rating))
            source["rows"] = len(ratings)
        if self.split_kind == "random":
            split = random_split(len(ratings), tuple(d.split), seed=d.split_seed)
            require_split_rows(len(ratings), d.split, source)
        else:
            split = per_user_split(ratings.users, tuple(d.split), seed=d.split_seed)
            if split["test"].size == 0:
                raise DataError(
                    f"{source.get('path', source.get('dataset'))}: no user among {len(ratings)} interaction row(s) "
                    "has 3; a per-user split needs at least one user with 3 (one each for train, valid and test)"
                )
            if self.name == "ranking" and ratings.num_items < TOP_K:
                raise DataError(
                    f"{source.get('path', source.get('dataset'))}: {ratings.num_items} distinct item(s); ranking "
                    f"metrics up to @{TOP_K} need at least {TOP_K} items"
                )
        return PreparedRatings(ratings=ratings, split=split, movielens=movielens, source=source)

    def num_ids(self, prepared: PreparedRatings, kind: str) -> int:
        return prepared.ratings.num_users if kind == "user" else prepared.ratings.num_items

    def global_mean(self, prepared: PreparedRatings) -> float:
        """Mean training rating (the rating models' offset ``mu``)."""
        return float(prepared.part("train").ratings.mean())

    def frequencies(self, prepared: PreparedRatings, kind: str) -> np.ndarray:
        train = prepared.part("train")
        ids = train.users if kind == "user" else train.items
        return np.bincount(ids, minlength=self.num_ids(prepared, kind))

    def graph(self, prepared: PreparedRatings, kind: str, name: str, relations) -> NeighbourGraph:
        return movielens_graph(prepared.movielens, kind, name, relations, self.num_ids(prepared, kind))

    def records(self, recipe, prepared: PreparedRatings) -> dict:
        return {
            "split.json": {
                "split_seed": recipe.data.split_seed,
                "fractions": recipe.data.split,
                "kind": "per-user" if self.split_kind == "per-user" else "random",
                "sizes": {name: int(idx.size) for name, idx in prepared.split.items()},
                "data": prepared.source,
            }
        }

    def data_used(self, recipe, prepared: PreparedRatings) -> dict[str, Any]:
        return prepared.source


class RatingTask(_InteractionTask):
    """Explicit ratings: squared loss, RMSE and MAE on every split."""

    name = "rating"
    train_fields = ("eval_train",)
    default_model = "mf"
    headline = ("test_rmse", "test_mae")

    def evaluated_metrics(self, recipe) -> tuple[str, ...]:
        return ("rmse", "mae")

    def extra_metric_names(self, recipe) -> tuple[str, ...]:
        """What :meth:`finish` adds: ``{val,test}_mse`` and ``{train,test}_mse_{popular,rare}``."""
        squared = [f"{split}_mse" for split in ("val", "test")]
        return (*squared, *(f"{split}_mse_{group}" for split in ("train", "test") for group in ("popular", "rare")))

    def monitor(self, recipe) -> tuple[str, str]:
        return "val_rmse", "min"

    def batches(self, recipe, prepared: PreparedRatings) -> TensorBatches:
        train = prepared.part("train")
        users, items = prepared.tensors("train")
        tensors = {"user": users, "item": items, "rating": torch.from_numpy(train.ratings)}
        return TensorBatches(tensors, recipe.train.batch_size, seed=recipe.train.seed)

    def evaluator(self, recipe, prepared: PreparedRatings) -> RatingEvaluator:
        splits = {}
        for name in SPLITS:
            users, items = prepared.tensors(name)
            splits[name] = {"user": users, "item": items, "rating": torch.from_numpy(prepared.part(name).ratings)}
        train_ratings = prepared.part("train").ratings
        return RatingEvaluator(splits, rating_range=(float(train_ratings.min()), float(train_ratings.max())))

    def trainer_options(self, recipe) -> dict:
        return {"eval_train": recipe.train.eval_train}

    def finish(self, recipe, prepared: PreparedRatings, trainer, evaluator: RatingEvaluator, metrics: dict) -> dict:
        """Adds the squared errors the mixed-dimension paper reports: ``val_mse``, ``test_mse`` and the MSE on the
        ratings of the most and the least popular third of items (by training mass; Appendix H, Fig. 3b/3e),
        ``{train,test}_mse_{popular,rare}``."""
        metrics = dict(metrics)
        for split in ("val", "test"):
            metrics[f"{split}_mse"] = metrics[f"{split}_rmse"] ** 2
        popular, rare = popularity_thirds(prepared.part("train").items, prepared.ratings.num_items)
        for split in ("train", "test"):
            predictions = evaluator.predict(trainer.model, split).double()
            target = evaluator.splits[split]["rating"].double()
            items = evaluator.splits[split]["item"].numpy()
            for group, mask in (("popular", popular), ("rare", rare)):
                keep = torch.from_numpy(mask[items])
                value = (predictions[keep] - target[keep]).pow(2).mean() if keep.any() else torch.tensor(float("nan"))
                metrics[f"{split}_mse_{group}"] = float(value)
        return metrics


class RankingTask(_InteractionTask):
    """Implicit feedback: sampled negatives in training, full ranking over each user's unseen items in evaluation."""

    name = "ranking"
    train_fields = ("num_negatives",)
    default_model = "bpr"
    split_kind = "per-user"
    headline = ("test_ndcg@10", "test_hit@10", "test_precision@10", "test_recall@10")

    def evaluated_metrics(self, recipe) -> tuple[str, ...]:
        from embreg.metrics.beyond_accuracy import beyond_accuracy_names

        ranked = tuple(f"{name}@{k}" for k in RANKING_KS for name in ("precision", "recall", "ndcg", "hit"))
        return ranked + beyond_accuracy_names(RANKING_KS)

    def monitor(self, recipe) -> tuple[str, str]:
        return "val_ndcg@10", "max"

    def batches(self, recipe, prepared: PreparedRatings) -> TensorBatches:
        train = prepared.part("train")
        users, items = prepared.tensors("train")
        t = recipe.train
        sampler = NegativeSampler(train.users, train.items, prepared.ratings.num_items)

        def add_negatives(batch: dict[str, torch.Tensor], generator: torch.Generator) -> dict[str, torch.Tensor]:
            batch["neg"] = sampler.sample(batch["user"], generator)
            return batch

        tensors = {"user": users.repeat(t.num_negatives), "pos": items.repeat(t.num_negatives)}
        return TensorBatches(tensors, t.batch_size, seed=t.seed, transform=add_negatives)

    def evaluator(self, recipe, prepared: PreparedRatings) -> RankingEvaluator:
        parts = {name: prepared.tensors(name) for name in SPLITS}
        train_u, train_i = parts["train"]
        valid_u, valid_i = parts["valid"]
        exclude = {"valid": (train_u, train_i), "test": (torch.cat([train_u, valid_u]), torch.cat([train_i, valid_i]))}
        relevant = {"valid": parts["valid"], "test": parts["test"]}
        return RankingEvaluator(
            prepared.ratings.num_users,
            prepared.ratings.num_items,
            relevant,
            exclude,
            ks=RANKING_KS,
            item_counts=prepared.part("train").item_popularity(),
        )


register_task(
    RatingTask(),
    "explicit ratings: squared loss; RMSE, MAE",
    "sse-stochastic-shared-embeddings.txt, Sec. 4.1 (MF on MovieLens)",
)
register_task(
    RankingTask(),
    "implicit feedback: sampled negatives; full-ranking precision/recall/NDCG/hit@k",
    "sse-stochastic-shared-embeddings.txt, Sec. 4.1 (BPR)",
)

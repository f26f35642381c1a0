"""Builders: turn a :class:`RecipeConfig` into data, a model with its index transforms, batches and an evaluator.

This is the only place that wires the lower floors (``data``, ``sse``, ``models``, ``train``) together. CTR
recipes are built by :mod:`embreg.recipes.ctr_builders`, mixed-dimension and NCF rating models by
:mod:`embreg.recipes.embedding_builders`; uniform MF and BPR are built here exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from embreg.data import (
    NegativeSampler,
    RatingsData,
    item_graph_from_genres,
    item_graph_from_kg,
    load_ml100k,
    load_ratings_file,
    per_user_split,
    random_split,
    user_graph_from_attributes,
)
from embreg.data.movielens import MovieLens100k
from embreg.errors import ConfigError
from embreg.models import BPR, BiasedMF
from embreg.recipes.ctr_builders import (
    PreparedCTRData,
    build_ctr_batches,
    build_ctr_evaluator,
    build_ctr_model,
    prepare_ctr_data,
)
from embreg.recipes.embedding_builders import apply_table_init, build_rating_model
from embreg.recipes.schema import RecipeConfig
from embreg.sse import SSE, NeighbourGraph, SSEGraph
from embreg.train.batches import TensorBatches
from embreg.train.ctr_evaluation import CTREvaluator
from embreg.train.evaluation import RankingEvaluator, RatingEvaluator

SPLITS = ("train", "valid", "test")


@dataclass
class PreparedData:
    """Interactions, their seeded split, and (for ML-100k) the side information graphs are built from.

    Attributes:
        ratings: every interaction used by the recipe.
        split: ``{"train"|"valid"|"test": index array into ratings}``.
        movielens: the full ML-100k bundle when the recipe uses it, else ``None``.
    """

    ratings: RatingsData
    split: dict[str, np.ndarray]
    movielens: MovieLens100k | None = None

    def part(self, name: str) -> RatingsData:
        return self.ratings.subset(self.split[name])


def prepare_data(cfg: RecipeConfig) -> PreparedData | PreparedCTRData:
    """Loads the interactions (or, for CTR, the table) named by ``cfg.data``; splits with ``cfg.data.split_seed``."""
    if cfg.task == "ctr":
        return prepare_ctr_data(cfg)
    d = cfg.data
    movielens = None
    if d.path is not None:
        ratings = load_ratings_file(d.path, user=d.user_col, item=d.item_col, rating=d.rating_col,
                                    timestamp=d.timestamp_col, sep=d.sep)
    elif d.dataset == "ml-100k":
        movielens = load_ml100k()
        ratings = movielens.ratings
    else:
        raise ConfigError(f"data.dataset={d.dataset!r} holds no ratings; use 'ml-100k' or set data.path")
    if d.max_rows is not None and d.max_rows < len(ratings):
        ratings = ratings.subset(np.arange(d.max_rows))
    if cfg.task == "ranking" and d.min_rating is not None:
        ratings = ratings.subset(np.flatnonzero(ratings.ratings >= d.min_rating))
    if cfg.task == "rating":
        split = random_split(len(ratings), tuple(d.split), seed=d.split_seed)
    else:
        split = per_user_split(ratings.users, tuple(d.split), seed=d.split_seed)
    return PreparedData(ratings=ratings, split=split, movielens=movielens)


def _needs_movielens(cfg: RecipeConfig, data: PreparedData, what: str) -> MovieLens100k:
    if data.movielens is None:
        raise ConfigError(f"{what} needs the ml-100k side information; it is not available with data.path")
    return data.movielens


def build_transforms(cfg: RecipeConfig, data: PreparedData) -> tuple[nn.Module | None, nn.Module | None]:
    """The user and item index transforms named by ``cfg.sse`` (``None`` where switched off)."""
    s = cfg.sse
    seed = cfg.train.seed + s.seed_offset
    num_users, num_items = data.ratings.num_users, data.ratings.num_items
    if s.kind == "none":
        return None, None
    if s.kind == "se":
        user = SSE(num_users, s.p_user, seed=seed) if s.p_user > 0 else None
        item = SSE(num_items, s.p_item, seed=seed + 1) if s.p_item > 0 else None
        return user, item
    user = item = None
    if s.p_user > 0:
        if s.user_graph == "none":
            user = SSE(num_users, s.p_user, seed=seed)
        else:
            ml = _needs_movielens(cfg, data, "sse.user_graph")
            edges = user_graph_from_attributes(ml, by=(s.user_graph,))
            user = SSEGraph(NeighbourGraph.from_edges(edges, num_users), s.p_user, s.rho_user, seed=seed)
    if s.p_item > 0:
        ml = _needs_movielens(cfg, data, "sse.item_graph")
        if s.item_graph == "kg":
            edges = item_graph_from_kg(ml, relations=tuple(s.kg_relations))
        else:
            edges = item_graph_from_genres(ml)
        item = SSEGraph(NeighbourGraph.from_edges(edges, num_items), s.p_item, s.rho_item, seed=seed + 1)
    return user, item


def build_model(cfg: RecipeConfig, data: PreparedData) -> nn.Module:
    """MF, NCF or BPR (uniform or mixed-dimension tables) with the recipe's index transforms; DLRM for CTR."""
    if cfg.task == "ctr":
        return build_ctr_model(cfg, data)
    m = cfg.model
    user_transform, item_transform = build_transforms(cfg, data)
    if m.name == "ncf" or cfg.embedding.kind == "md":
        train = data.part("train")
        return build_rating_model(cfg, data.ratings.num_users, data.ratings.num_items, train.users, train.items,
                                  float(train.ratings.mean()), user_transform, item_transform)
    common = dict(init_std=m.init_std, user_transform=user_transform, item_transform=item_transform,
                  dropout=m.dropout, l2=m.l2)
    num_users, num_items = data.ratings.num_users, data.ratings.num_items
    if m.name == "mf":
        global_mean = float(data.part("train").ratings.mean())
        model = BiasedMF.build(num_users, num_items, m.dim, global_mean=global_mean, **common)
    else:
        model = BPR.build(num_users, num_items, m.dim, **common)
    apply_table_init(m, model.user_embedding, model.item_embedding)
    return model


def _pair_tensors(part: RatingsData) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(part.users), torch.from_numpy(part.items)


def build_batches(cfg: RecipeConfig, data: PreparedData) -> TensorBatches:
    """Training batches: ``user, item, rating`` for rating tasks; ``user, pos, neg`` (sampled) for ranking."""
    if cfg.task == "ctr":
        return build_ctr_batches(cfg, data)
    train = data.part("train")
    users, items = _pair_tensors(train)
    t = cfg.train
    if cfg.task == "rating":
        tensors = {"user": users, "item": items, "rating": torch.from_numpy(train.ratings)}
        return TensorBatches(tensors, t.batch_size, seed=t.seed)
    sampler = NegativeSampler(train.users, train.items, data.ratings.num_items)

    def add_negatives(batch: dict[str, torch.Tensor], generator: torch.Generator) -> dict[str, torch.Tensor]:
        batch["neg"] = sampler.sample(batch["user"], generator)
        return batch

    tensors = {"user": users.repeat(t.num_negatives), "pos": items.repeat(t.num_negatives)}
    return TensorBatches(tensors, t.batch_size, seed=t.seed, transform=add_negatives)


def build_evaluator(
    cfg: RecipeConfig, data: PreparedData,
) -> RatingEvaluator | RankingEvaluator | CTREvaluator:
    """RMSE/MAE on every split for rating tasks; full-ranking top-k metrics on valid/test for ranking tasks;
    log-loss, accuracy and AUC for CTR tasks."""
    if cfg.task == "ctr":
        return build_ctr_evaluator(cfg, data)
    if cfg.task == "rating":
        splits = {}
        for name in SPLITS:
            part = data.part(name)
            users, items = _pair_tensors(part)
            splits[name] = {"user": users, "item": items, "rating": torch.from_numpy(part.ratings)}
        train_ratings = data.part("train").ratings
        return RatingEvaluator(splits, rating_range=(float(train_ratings.min()), float(train_ratings.max())))
    parts = {name: _pair_tensors(data.part(name)) for name in SPLITS}
    train_u, train_i = parts["train"]
    valid_u, valid_i = parts["valid"]
    exclude = {
        "valid": (train_u, train_i),
        "test": (torch.cat([train_u, valid_u]), torch.cat([train_i, valid_i])),
    }
    relevant = {"valid": parts["valid"], "test": parts["test"]}
    return RankingEvaluator(data.ratings.num_users, data.ratings.num_items, relevant, exclude)

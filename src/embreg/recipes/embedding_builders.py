"""Builders of user/item embedding tables (uniform or mixed-dimension) and of the rating models that use them.

Mixed-dimension tables follow mixed-dimension-embeddings.txt, Appendix H: users and items are blocked
separately by their *training* frequencies (Alg. 3) and sized jointly by the power-law rule (Alg. 1), from the
base dimension ``model.dim`` or from ``embedding.budget``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from embreg.embeddings import MixedDimensionPlan, init_embedding_, md_embedding_tables
from embreg.errors import ConfigError
from embreg.models import NCF, BiasedMF
from embreg.recipes.schema import ModelConfig, RecipeConfig


def _uniform(rows: int, m: ModelConfig) -> nn.Embedding:
    return init_embedding_(nn.Embedding(rows, m.dim), m.init, std=m.init_std)


def apply_table_init(m: ModelConfig, *tables: nn.Module) -> None:
    """Re-initialises ``tables`` by ``model.init`` when it is not ``normal`` (they were built normal with
    ``model.init_std``, so the default draws nothing more and keeps every seed's numbers)."""
    if m.init != "normal":
        for table in tables:
            init_embedding_(table, m.init)


def build_user_item_embeddings(
    cfg: RecipeConfig, num_users: int, num_items: int, train_users: np.ndarray, train_items: np.ndarray,
) -> tuple[nn.Module, nn.Module, MixedDimensionPlan | None]:
    """The user and item tables named by ``cfg.embedding`` (and the MD plan, ``None`` for uniform tables).

    Args:
        cfg: the recipe.
        num_users, num_items: table sizes.
        train_users, train_items: (N,) training interactions; their counts are the row frequencies.
    """
    e, m = cfg.embedding, cfg.model
    if e.kind == "uniform":
        return _uniform(num_users, m), _uniform(num_items, m), None
    frequencies = [np.bincount(train_users, minlength=num_users), np.bincount(train_items, minlength=num_items)]
    base_dim = m.dim if e.budget is None else e.max_dim
    try:
        (users, items), plan = md_embedding_tables(
            [torch.from_numpy(f) for f in frequencies], num_blocks=e.num_blocks, alpha=e.alpha, base_dim=base_dim,
            budget=e.budget, min_dim=e.min_dim, round_pow2=e.round_pow2, init_std=m.init_std)
    except ValueError as exc:
        raise ConfigError(f"embedding: {exc}") from exc
    apply_table_init(m, users, items)
    return users, items, plan


def build_rating_model(
    cfg: RecipeConfig, num_users: int, num_items: int, train_users: np.ndarray, train_items: np.ndarray,
    global_mean: float, user_transform: nn.Module | None, item_transform: nn.Module | None,
) -> nn.Module:
    """MF or NCF over the tables of :func:`build_user_item_embeddings`, with the recipe's index transforms."""
    m = cfg.model
    users, items, _ = build_user_item_embeddings(cfg, num_users, num_items, train_users, train_items)
    if m.name == "ncf":
        if m.l2 != 0.0:
            raise ConfigError(f"model.l2={m.l2} is not used by 'ncf' (the paper trains CF without norm penalties); "
                              "set it to 0")
        return NCF(users, items, mlp_dims=tuple(m.mlp), global_mean=global_mean, dropout=m.dropout,
                   user_transform=user_transform, item_transform=item_transform)
    user_bias, item_bias = nn.Embedding(num_users, 1), nn.Embedding(num_items, 1)
    nn.init.zeros_(user_bias.weight)
    nn.init.zeros_(item_bias.weight)
    return BiasedMF(users, items, user_bias, item_bias, global_mean=global_mean, user_transform=user_transform,
                    item_transform=item_transform, dropout=m.dropout, l2=m.l2)

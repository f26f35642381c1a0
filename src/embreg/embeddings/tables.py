"""The two embedding kinds a recipe can name (``embeddings: {name: uniform}`` or ``{name: md, ...}``).

A model asks for its tables with a :class:`TableRequest` (rows and training counts per table, the base dimension,
the initialisation, and whether tables are user/item tables blocked by popularity or one block per CTR field);
the recipe's ``embeddings`` entry answers it. So every model that has tables takes mixed dimensions without a
flag of its own.

mixed-dimension-embeddings.txt: Alg. 1 (power-law sizing with temperature ``alpha`` from a base dimension or a
parameter budget), Alg. 3 (equipartition blocking of each user/item table), Sec. III (one block per CTR field).

Example:
    >>> import numpy as np
    >>> request = TableRequest([np.array([5, 1, 0]), np.array([2, 2])], dim=4)
    >>> tables, plan = build_uniform(UniformTablesConfig(), request)
    >>> [tuple(t.weight.shape) for t in tables], plan
    ([(3, 4), (2, 4)], None)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import nn

from embreg.embeddings.builder import MixedDimensionPlan, md_embedding_tables, md_feature_embeddings
from embreg.embeddings.table_init import EmbeddingInit, init_embedding_
from embreg.errors import ConfigError
from embreg.registry import register

__all__ = ["TableRequest", "UniformTablesConfig", "MixedDimensionTablesConfig", "build_uniform", "build_md"]


@dataclass
class TableRequest:
    """What a model asks for.

    Attributes:
        frequencies: one 1-D array of training counts per table; its length is the table's row count.
        dim: the (base) dimension D every table returns.
        init: ``normal`` (rows ``N(0, init_std^2)``) or ``xavier_uniform`` (see :func:`init_embedding_`).
        init_std: standard deviation of ``normal``.
        layout: ``blocks`` (user/item tables, each blocked by popularity, Alg. 3) or ``fields`` (CTR: one block
            per field, Sec. III).
        bag_fields: ``fields`` only: table index -> padding id of multi-valued (mean-pooled bag) fields.
    """

    frequencies: Sequence[np.ndarray]
    dim: int
    init: EmbeddingInit = "normal"
    init_std: float = 0.1
    layout: Literal["blocks", "fields"] = "blocks"
    bag_fields: Mapping[int, int | None] = field(default_factory=dict)


@dataclass
class UniformTablesConfig:
    """One ``nn.Embedding`` (``nn.EmbeddingBag`` for bag fields) per table at the model's dimension.

    Attributes:
        sparse: sparse gradients (``embeddings: {name: uniform, sparse: true}``): a step's gradient holds only the
            rows of the batch instead of the whole table, which pays off for large tables and small batches. The
            optimizer must take them: ``train.optimizer=sparse-adam`` (lazy Adam, :mod:`embreg.optim.lazy_adam`),
            ``sgd`` or ``adagrad``, without weight decay or gradient clipping (other settings are refused before
            training); DDP refuses sparse gradients.
    """

    sparse: bool = False


@dataclass
class MixedDimensionTablesConfig:
    """Mixed-dimension tables.

    Attributes:
        alpha: temperature in [0, 1] (0: uniform dimensions).
        budget: total embedding-row parameters ``sum n_i d_i`` over all tables (projections come on top and are
            reported exactly); ``null``: size from the model's base dimension (the most popular block gets it).
        num_blocks: equipartition blocks per user/item table (CTR fields: one block each).
        round_pow2: round dimensions to powers of two.
        min_dim: smallest block dimension.
        max_dim: with ``budget``: the largest block dimension and then the base dimension (``null``: the largest
            block dimension).
        sparse: sparse gradients for the blocks' rows (``flat_rows``; the projections keep dense ones), as
            :class:`UniformTablesConfig`'s ``sparse``: needs ``train.optimizer=sparse-adam`` (or ``sgd`` /
            ``adagrad``).
    """

    alpha: float = 0.3
    budget: float | None = None
    num_blocks: int = 8
    round_pow2: bool = False
    min_dim: int = 1
    max_dim: int | None = None
    sparse: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"alpha={self.alpha} is outside the valid range [0, 1]")
        if self.budget is not None and self.budget <= 0:
            raise ConfigError(f"budget={self.budget} must be > 0 (or null to size from the model's dim)")
        if self.num_blocks < 1:
            raise ConfigError(f"num_blocks={self.num_blocks} must be >= 1")
        if self.min_dim < 1:
            raise ConfigError(f"min_dim={self.min_dim} must be >= 1")
        if self.max_dim is not None and self.max_dim < self.min_dim:
            raise ConfigError(f"max_dim={self.max_dim} must be >= min_dim={self.min_dim}")


@register(
    "embedding", "uniform", config=UniformTablesConfig, summary="one table per id kind at the model's dim", reference=""
)
def build_uniform(config: UniformTablesConfig, request: TableRequest) -> tuple[list[nn.Module], None]:
    """Plain tables, initialised by ``request.init``.

    User/item tables are built and initialised one after the other, CTR fields are all built before any is
    initialised: the order of random draws that every stored result was made with.
    """

    def make(index: int, rows: int) -> nn.Module:
        if index in request.bag_fields:
            return nn.EmbeddingBag(
                rows, request.dim, mode="mean", padding_idx=request.bag_fields[index], sparse=config.sparse
            )
        return nn.Embedding(rows, request.dim, sparse=config.sparse)

    rows = [len(counts) for counts in request.frequencies]
    if request.layout == "blocks":
        return [init_embedding_(make(i, n), request.init, std=request.init_std) for i, n in enumerate(rows)], None
    tables = [make(i, n) for i, n in enumerate(rows)]
    return [init_embedding_(t, request.init, std=request.init_std) for t in tables], None


@register(
    "embedding",
    "md",
    config=MixedDimensionTablesConfig,
    summary="mixed-dimension tables: popular rows wide, rare rows narrow, projected to the base dim",
    reference="mixed-dimension-embeddings.txt, Alg. 1 (sizing), Alg. 3 (blocking), Sec. III (per field)",
)
def build_md(config: MixedDimensionTablesConfig, request: TableRequest) -> tuple[list[nn.Module], MixedDimensionPlan]:
    """Mixed-dimension tables sized jointly over every table of the request."""
    counts = [torch.as_tensor(np.asarray(f)) for f in request.frequencies]
    base_dim = request.dim if config.budget is None else config.max_dim
    layers: Iterable[nn.Module]
    try:
        if request.layout == "fields":
            layers, plan = md_feature_embeddings(
                counts,
                alpha=config.alpha,
                base_dim=base_dim,
                budget=config.budget,
                min_dim=config.min_dim,
                round_pow2=config.round_pow2,
                bag_fields=dict(request.bag_fields),
                bag_mode="mean",
                init_std=request.init_std,
                sparse=config.sparse,
            )
        else:
            layers, plan = md_embedding_tables(
                counts,
                num_blocks=config.num_blocks,
                alpha=config.alpha,
                base_dim=base_dim,
                budget=config.budget,
                min_dim=config.min_dim,
                round_pow2=config.round_pow2,
                init_std=request.init_std,
                sparse=config.sparse,
            )
    except ValueError as exc:
        raise ConfigError(f"embeddings: {exc}") from exc
    tables = list(layers)
    if request.init != "normal":  # built normal with init_std: the default draws nothing more
        for table in tables:
            init_embedding_(table, request.init)
    return tables, plan

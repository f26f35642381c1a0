"""From query frequencies to ready layers: blocking (Alg. 3 or per feature) + sizing (Alg. 1) + layers.

mixed-dimension-embeddings.txt: Sec. III (layer, per-feature blocking), Alg. 1 (power-law sizing), Appendix H
and Alg. 3 (equipartition blocking for collaborative filtering). Several tables (users and items, or the fields
of a CTR model) are sized *jointly*: their blocks share one ``lambda``, so one budget is spread over all of them
by popularity, and all of them project to one base dimension.

Example:
    >>> freq = torch.tensor([50.0, 20, 10, 5, 5, 3, 2, 2, 1, 1, 1])
    >>> emb = md_embedding(freq, num_blocks=3, alpha=0.5, base_dim=16)
    >>> emb(torch.tensor([0, 10])).shape, emb.block_dims
    (torch.Size([2, 16]), (16, 10, 4))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from embreg.embeddings.bag import MixedDimensionEmbeddingBag
from embreg.embeddings.blocking import Blocking, equipartition_blocks, feature_blocks
from embreg.embeddings.mixed_dimension import MixedDimensionEmbedding
from embreg.embeddings.sizing import md_parameter_count, power_law_dims
from embreg.errors import EmbregError

__all__ = [
    "MixedDimensionPlan",
    "plan_mixed_dimensions",
    "md_embedding",
    "md_embedding_tables",
    "md_feature_embeddings",
]


@dataclass(frozen=True)
class MixedDimensionPlan:
    """The blocks and dimensions of one or more tables that share a base dimension.

    Attributes:
        blockings: one :class:`Blocking` per table.
        dims: per table, the dimension of each of its blocks.
        base_dim: D, the common output dimension.
        alpha: the temperature used.
    """

    blockings: tuple[Blocking, ...]
    dims: tuple[tuple[int, ...], ...]
    base_dim: int
    alpha: float

    @property
    def row_parameters(self) -> int:
        """``sum n_i d_i`` over every block of every table (what a budget counts)."""
        return sum(n * d for b, dims in zip(self.blockings, self.dims) for n, d in zip(b.rows, dims))

    @property
    def num_parameters(self) -> int:
        """Exact parameters of all the tables: rows plus projections."""
        return sum(md_parameter_count(b.rows, dims, self.base_dim) for b, dims in zip(self.blockings, self.dims))

    @property
    def uniform_num_parameters(self) -> int:
        """Parameters of uniform tables at the base dimension: ``sum_t N_t * D``."""
        return sum(b.num_rows for b in self.blockings) * self.base_dim


def plan_mixed_dimensions(
    blockings: Sequence[Blocking],
    alpha: float,
    *,
    base_dim: int | None = None,
    budget: float | None = None,
    min_dim: int = 1,
    round_pow2: bool = False,
) -> MixedDimensionPlan:
    """Sizes every block of every table with one power-law rule (Alg. 1).

    The blocks' popularities ``p_i`` must be on a common scale: per-table popularities (each table's masses sum
    to 1) are, when every example queries each table once (a user and an item per rating).

    Args:
        blockings: the tables' blockings.
        alpha: temperature in [0, 1]; 0 gives one uniform dimension.
        base_dim: without ``budget``, the most popular block's dimension; with it, an upper bound (``None``:
            the base dimension is the largest block dimension).
        budget: total embedding-row parameters ``sum n_i d_i`` over all tables (projections not included).
        min_dim: smallest block dimension.
        round_pow2: round dimensions to powers of two.

    Returns:
        A :class:`MixedDimensionPlan`.

    Example:
        >>> users = equipartition_blocks(torch.tensor([9.0, 3, 2, 1, 1]), 2)
        >>> items = equipartition_blocks(torch.tensor([4.0, 4, 4, 1, 1, 1, 1]), 2)
        >>> plan = plan_mixed_dimensions([users, items], alpha=0.0, budget=48)
        >>> plan.dims, plan.base_dim, plan.num_parameters
        (((4, 4), (4, 4)), 4, 48)
    """
    if not blockings:
        raise EmbregError("blockings is empty; give at least one table")
    popularity = [p for b in blockings for p in b.popularity]
    rows = [n for b in blockings for n in b.rows]
    flat = power_law_dims(
        popularity, alpha, base_dim=base_dim, budget=budget, rows=rows, min_dim=min_dim, round_pow2=round_pow2
    )
    dims, start = [], 0
    for b in blockings:
        dims.append(tuple(flat[start : start + b.num_blocks]))
        start += b.num_blocks
    return MixedDimensionPlan(tuple(blockings), tuple(dims), base_dim or max(flat), float(alpha))


def md_embedding_tables(
    frequencies: Sequence[Sequence[float] | torch.Tensor],
    *,
    num_blocks: int,
    alpha: float,
    base_dim: int | None = None,
    budget: float | None = None,
    min_dim: int = 1,
    round_pow2: bool = False,
    **layer_kwargs,
) -> tuple[list[MixedDimensionEmbedding], MixedDimensionPlan]:
    """Equipartition-blocked (Alg. 3) mixed-dimension tables sized jointly (Alg. 1), e.g. users and items.

    Args:
        frequencies: one (N_t,) count vector per table (training-set query counts per caller id).
        num_blocks: k blocks per table (the paper finds 8 to 16 enough, Fig. 5).
        alpha, base_dim, budget, min_dim, round_pow2: as :func:`plan_mixed_dimensions`.
        layer_kwargs: passed to :class:`MixedDimensionEmbedding` (``sparse``, ``init_std``, ...).

    Returns:
        The layers (callers keep their own ids) and the plan (exact parameter counts).

    Example:
        >>> (u, i), plan = md_embedding_tables([torch.rand(50) + 0.1, torch.rand(80) + 0.1], num_blocks=4,
        ...                                    alpha=0.3, budget=1000)
        >>> u.embedding_dim == i.embedding_dim == plan.base_dim
        True
    """
    blockings = [equipartition_blocks(f, num_blocks) for f in frequencies]
    plan = plan_mixed_dimensions(
        blockings, alpha, base_dim=base_dim, budget=budget, min_dim=min_dim, round_pow2=round_pow2
    )
    layers = [
        MixedDimensionEmbedding.from_blocking(b, d, plan.base_dim, **layer_kwargs)
        for b, d in zip(plan.blockings, plan.dims)
    ]
    return layers, plan


def md_embedding(
    frequencies: Sequence[float] | torch.Tensor,
    *,
    num_blocks: int,
    alpha: float,
    base_dim: int | None = None,
    budget: float | None = None,
    min_dim: int = 1,
    round_pow2: bool = False,
    **layer_kwargs,
) -> MixedDimensionEmbedding:
    """One equipartition-blocked mixed-dimension table: ``(frequencies, k, alpha, base dim or budget) -> layer``.

    Args:
        frequencies: (N,) query counts per caller id.
        num_blocks: k.
        alpha, base_dim, budget, min_dim, round_pow2: as :func:`plan_mixed_dimensions`.
        layer_kwargs: passed to :class:`MixedDimensionEmbedding`.

    Example:
        >>> emb = md_embedding(torch.arange(100, 0, -1.0), num_blocks=4, alpha=0.4, budget=2000, base_dim=32)
        >>> emb.num_embeddings, emb.embedding_dim
        (100, 32)
    """
    layers, _ = md_embedding_tables(
        [frequencies],
        num_blocks=num_blocks,
        alpha=alpha,
        base_dim=base_dim,
        budget=budget,
        min_dim=min_dim,
        round_pow2=round_pow2,
        **layer_kwargs,
    )
    return layers[0]


def md_feature_embeddings(
    frequencies: Sequence[Sequence[float] | torch.Tensor],
    *,
    alpha: float,
    base_dim: int | None = None,
    budget: float | None = None,
    min_dim: int = 1,
    round_pow2: bool = False,
    bag_fields: Mapping[int, int | None] | None = None,
    bag_mode: str = "mean",
    **layer_kwargs,
) -> tuple[nn.ModuleList, MixedDimensionPlan]:
    """One single-block mixed-dimension layer per categorical feature, sized jointly (Sec. III + Alg. 1).

    Feature ``i`` gets dimension ``d_i`` from its measured popularity (:func:`feature_blocks`) and a
    projection to the shared base dimension (none where ``d_i`` is the base dimension, so ``alpha = 0`` gives
    plain uniform tables).

    Args:
        frequencies: one (n_i,) count vector per feature (training-set counts of each value).
        alpha, base_dim, budget, min_dim, round_pow2: as :func:`plan_mixed_dimensions`.
        bag_fields: ``{feature index: padding id or None}`` for multi-hot features, which get a
            :class:`MixedDimensionEmbeddingBag` (``bag_mode``) instead of a :class:`MixedDimensionEmbedding`.
        layer_kwargs: passed to the layers.

    Returns:
        ``(layers, plan)``: a ``ModuleList`` with one layer per feature (ids are the feature's own value ids)
        and a plan whose single blocking has one block per feature.

    Example:
        >>> layers, plan = md_feature_embeddings([torch.full((4,), 100.0), torch.ones(400)], alpha=0.5, budget=800)
        >>> [layer.block_dims for layer in layers], plan.base_dim
        ([(18,), (2,)], 18)
    """
    blocking = feature_blocks(frequencies)
    plan = plan_mixed_dimensions(
        [blocking], alpha, base_dim=base_dim, budget=budget, min_dim=min_dim, round_pow2=round_pow2
    )
    bag_fields = dict(bag_fields or {})
    unknown = sorted(set(bag_fields) - set(range(blocking.num_blocks)))
    if unknown:
        raise EmbregError(f"bag_fields {unknown} are outside the valid range [0, {blocking.num_blocks - 1}]")
    layers = nn.ModuleList()
    for i, (rows, dim) in enumerate(zip(blocking.rows, plan.dims[0])):
        if i in bag_fields:
            layers.append(
                MixedDimensionEmbeddingBag(
                    [rows], [dim], plan.base_dim, mode=bag_mode, padding_idx=bag_fields[i], **layer_kwargs
                )
            )
        else:
            layers.append(MixedDimensionEmbedding([rows], [dim], plan.base_dim, **layer_kwargs))
    return layers, plan

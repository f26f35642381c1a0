"""Mixed-dimension (MD) embeddings as a TorchRec ``EmbeddingBagCollection``, so ``DistributedModelParallel`` shards them.

mixed-dimension-embeddings.txt, Sec. III and Fig. 1: an MD layer holds ``k`` blocks ``E_i`` (n_i x d_i) and
projections ``P_i`` (d_i x D); the vector of the row at position ``x`` of block ``i`` is ``E_i[x - t_i] @ P_i``
(Alg. 2). :class:`TorchRecMixedDimensionEmbedding` stores each ``E_i`` as its own table of one TorchRec
``EmbeddingBagCollection`` (EBC), each at its own dimension, and keeps the ``P_i`` beside it. TorchRec's
``DistributedModelParallel`` (DMP) then places the blocks (tables) on ranks like any other tables, while the small
projections stay replicated (data parallel). The id -> (block, row) map is the one of
:class:`embreg.embeddings.MixedDimensionEmbedding` (its ``index_map`` and block offsets), so
:meth:`~TorchRecMixedDimensionEmbedding.from_mixed_dimension` rebuilds an embreg layer with the same weights and
the same outputs, and :meth:`~TorchRecMixedDimensionEmbedding.to_mixed_dimension` goes back.

Why an ``EmbeddingBagCollection`` and not an ``EmbeddingCollection``: TorchRec's unpooled ``EmbeddingCollection``
needs one dimension for all its tables (TorchRec issue 294); the pooled EBC takes a dimension per table. Each id
becomes a bag of one in its own block's feature and an empty bag in every other block's feature; an empty bag
pools to zeros, so the concatenated pooled output times the stacked projections is ``E_i[r] @ P_i`` (up to float
rounding in the sum).

FBGEMM's sharded kernels need every table's dimension divisible by 4 (TorchRec issue 1495; on the CPU the
sharder fails with ``AssertionError: table ... has local_cols=6 not divisible by 4``). Size new layers with
:func:`power_law_dims_multiple_of` (Alg. 1 rounded to multiples of 4), or convert an existing layer with
``pad=True`` (tables widened with ignored zero columns).

Needs the ``torchrec`` extra; see docs/torchrec.md for the set-up command (TorchRec with FBGEMM's CPU build and
a matching torch).

Example:
    >>> import torch
    >>> from embreg.embeddings import MixedDimensionEmbedding
    >>> layer = MixedDimensionEmbedding([4, 12], [8, 4], base_dim=8)
    >>> trec = TorchRecMixedDimensionEmbedding.from_mixed_dimension(layer)
    >>> ids = torch.tensor([0, 5, 15])
    >>> trec(ids).shape, torch.allclose(trec(ids), layer(ids), atol=1e-6)
    (torch.Size([3, 8]), True)
    >>> trec.table_dims
    (8, 4)
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import cast

import torch
from torch import nn

from embreg.embeddings._checks import check_block_layout, check_ids, check_int
from embreg.embeddings.bag import MixedDimensionEmbeddingBag
from embreg.embeddings.blocking import equipartition_blocks
from embreg.embeddings.mixed_dimension import MixedDimensionEmbedding
from embreg.embeddings.sizing import power_law_sizes
from embreg.errors import EmbregError

try:
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, KeyedJaggedTensor, PoolingType
    from torchrec.distributed.sharding_plan import construct_module_sharding_plan, table_wise
    from torchrec.distributed.types import ShardingPlan
except (ImportError, OSError, RuntimeError) as _exc:  # OSError/RuntimeError: FBGEMM's library fails to load
    raise ImportError(
        "embreg.integrations.torchrec_md needs TorchRec and an FBGEMM built for the installed torch "
        f"(import failed: {type(_exc).__name__}: {_exc}). Set up a separate environment as docs/torchrec.md says: "
        "python3.11 -m venv VENV && VENV/bin/pip install torch==2.14.1 fbgemm-gpu-cpu==1.9.0 tensordict torchmetrics "
        "pyre-extensions iopath && VENV/bin/pip install --no-deps torchrec==1.9.2 -e . && VENV/bin/pip install numpy "
        "pandas pyarrow pyyaml scipy tqdm matplotlib safetensors pytest"
    ) from _exc

__all__ = [
    "DIM_MULTIPLE",
    "TorchRecMixedDimensionEmbedding",
    "power_law_dims_multiple_of",
    "round_dims_to_multiple",
    "table_wise_plan",
]

DIM_MULTIPLE = 4
"""FBGEMM's sharded embedding kernels need every table dimension divisible by this (TorchRec issue 1495)."""

POOLINGS = ("sum", "mean")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def round_dims_to_multiple(
    sizes: torch.Tensor | Sequence[float],
    *,
    multiple_of: int = DIM_MULTIPLE,
    min_dim: int = 1,
    max_dim: int | None = None,
) -> list[int]:
    """Rounds continuous dimensions to the nearest multiple of ``multiple_of`` (halves up), then bounds them.

    A size is rounded to ``m * floor(size / m + 1/2)``; the result is then raised to the smallest multiple of
    ``m`` that is ``>= max(min_dim, 1)`` (so nothing rounds to 0) and lowered to the largest multiple of ``m``
    that is ``<= max_dim``.

    Args:
        sizes: (k,) continuous dimensions (e.g. :func:`embreg.embeddings.power_law_sizes`).
        multiple_of: m, the step (4 for FBGEMM).
        min_dim, max_dim: bounds; ``max_dim`` must be at least one step.

    Returns:
        k dimensions, each a multiple of ``m``.

    Example:
        >>> round_dims_to_multiple([64.0, 29.0, 9.0, 1.2])
        [64, 28, 8, 4]
        >>> round_dims_to_multiple([10.0, 2.0], min_dim=5)
        [12, 8]
    """
    m = check_int(multiple_of, "multiple_of", 1)
    min_dim = check_int(min_dim, "min_dim", 1)
    low = m * math.ceil(min_dim / m)
    high = None
    if max_dim is not None:
        max_dim = check_int(max_dim, "max_dim", m)
        high = m * (max_dim // m)
        if low > high:
            raise EmbregError(f"min_dim={min_dim} rounds up to {low}, outside the valid range [1, max_dim={high}]")
    values = torch.as_tensor(sizes, dtype=torch.float64)
    rounded = (torch.floor(values / m + 0.5) * m).clamp_min(low)
    if high is not None:
        rounded = rounded.clamp_max(high)
    return [int(v) for v in rounded.tolist()]


def power_law_dims_multiple_of(
    popularity: Sequence[float] | torch.Tensor,
    alpha: float,
    *,
    base_dim: int | None = None,
    budget: float | None = None,
    rows: Sequence[int] | None = None,
    min_dim: int = DIM_MULTIPLE,
    multiple_of: int = DIM_MULTIPLE,
) -> list[int]:
    """Block dimensions of the power-law rule (mixed-dimension-embeddings.txt, Alg. 1) as multiples of 4.

    :func:`embreg.embeddings.power_law_sizes` (``d_i = lambda * p_i ** alpha``, ``lambda`` from the base
    dimension or the budget) followed by :func:`round_dims_to_multiple`. With ``base_dim`` (which must itself be
    a multiple of ``multiple_of``) the most popular block keeps exactly ``base_dim``. With ``budget`` the
    continuous sizes meet it exactly and rounding moves each block by at most ``multiple_of / 2`` per row (more
    for blocks raised to ``min_dim``), so the total ``sum_i n_i d_i`` is within ``sum_i n_i * multiple_of / 2``
    of the budget when no bound is active.

    Args:
        popularity: (k,) average query probability of a row of each block (``Blocking.popularity``).
        alpha: temperature in [0, 1] (0: one dimension for every block).
        base_dim: dimension of the most popular block (without ``budget``) or upper bound (with it).
        budget: total embedding-row parameters ``sum_i n_i d_i`` (needs ``rows``).
        rows: (k,) rows per block.
        min_dim: smallest dimension before rounding up to a multiple (default: one step).
        multiple_of: the step of the dimensions (4 for FBGEMM).

    Returns:
        k integer dimensions, each a multiple of ``multiple_of``.

    Example:
        >>> power_law_dims_multiple_of([0.5, 0.1, 0.01], alpha=0.5, base_dim=64)
        [64, 28, 8]
    """
    multiple_of = check_int(multiple_of, "multiple_of", 1)
    if base_dim is not None and check_int(base_dim, "base_dim", 1) % multiple_of:
        raise EmbregError(f"base_dim={base_dim} must be a multiple of multiple_of={multiple_of}")
    sizes = power_law_sizes(popularity, alpha, base_dim=base_dim, budget=budget, rows=rows, min_dim=min_dim)
    return round_dims_to_multiple(sizes, multiple_of=multiple_of, min_dim=min_dim, max_dim=base_dim)


class TorchRecMixedDimensionEmbedding(nn.Module):
    """An MD embedding layer whose blocks ``E_i`` are the tables of one TorchRec ``EmbeddingBagCollection``.

    Same vectors as :class:`embreg.embeddings.MixedDimensionEmbedding` (Alg. 2 of
    mixed-dimension-embeddings.txt): caller id -> position (``index_map``) -> block ``i`` and row
    ``x - t_i`` -> ``E_i[x - t_i] @ P_i``. The EBC (``self.ebc``) holds table ``{feature}_block{i}`` (n_i rows,
    ``table_dims[i]`` columns) read through feature ``{feature}_block{i}`` with sum pooling; ``P_i`` (d_i x D)
    is ``self.projections[str(i)]`` (absent for an identity block, ``d_i == D``). Only ``self.ebc`` is what
    DMP shards; the projections and ``index_map`` stay on every rank.

    With ``pad=True`` a block whose ``d_i`` is not a multiple of ``dim_multiple`` is stored in a table widened
    to the next multiple; the extra columns are never read (their gradient is 0), so outputs are unchanged
    and the cost is ``n_i * (table_dim - d_i)`` idle floats.

    Args:
        block_rows: n_i per block, in blocked order.
        block_dims: d_i per block, each in [1, D].
        base_dim: D, the output dimension.
        index_map: (N,) position in the blocked order of each caller id, or ``None`` (ids are positions).
        feature: the name of this id feature (a Python identifier): the key read from a ``KeyedJaggedTensor``
            and the prefix of the table and feature names.
        pooling: ``sum`` or ``mean`` of the vectors of a bag (a ``KeyedJaggedTensor`` input; single ids are bags
            of one, for which both agree).
        dim_multiple: every table dimension must be divisible by it (4: FBGEMM's sharded kernels; 1: no check,
            for unsharded or data-parallel use only).
        pad: widen tables whose ``d_i`` is not a multiple instead of raising.
        init_std: rows start as N(0, init_std^2), projections as N(0, 1/d_i) (as embreg's layer).
        device: where the tables, projections and buffers are made (default CPU; DMP moves the tables it shards).

    Shapes:
        ids: (...) integer ids in [0, N) -> (..., D); or a ``KeyedJaggedTensor`` holding key ``feature`` with B
        bags -> (B, D) (empty bags give zeros).

    Example:
        >>> emb = TorchRecMixedDimensionEmbedding([10, 90], [16, 4], base_dim=16, feature="item")
        >>> emb(torch.tensor([[0, 50], [99, 3]])).shape
        torch.Size([2, 2, 16])
        >>> kjt = KeyedJaggedTensor(keys=["item"], values=torch.tensor([0, 50, 99]), lengths=torch.tensor([2, 0, 1]))
        >>> emb(kjt).shape
        torch.Size([3, 16])
        >>> sorted(emb.ebc.embedding_bags), emb.num_parameters
        (['item_block0', 'item_block1'], 584)
    """

    offsets: torch.Tensor
    index_map: torch.Tensor | None

    def __init__(
        self,
        block_rows: Sequence[int],
        block_dims: Sequence[int],
        base_dim: int,
        *,
        index_map: torch.Tensor | None = None,
        feature: str = "ids",
        pooling: str = "sum",
        dim_multiple: int = DIM_MULTIPLE,
        pad: bool = False,
        init_std: float = 1.0,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        rows, dims, base_dim = check_block_layout(block_rows, block_dims, base_dim)
        dim_multiple = check_int(dim_multiple, "dim_multiple", 1)
        for i, d in enumerate(dims):
            if d % dim_multiple and not pad:
                raise EmbregError(
                    f"block_dims[{i}]={d} is not a multiple of {dim_multiple}, which FBGEMM's sharded kernels need; "
                    "size the blocks with power_law_dims_multiple_of, pass pad=True (wider tables, same outputs) "
                    "or dim_multiple=1 (no sharding)"
                )
        if not isinstance(feature, str) or not _NAME.match(feature):
            raise EmbregError(f"feature={feature!r} must be a Python identifier (letters, digits, underscores)")
        if pooling not in POOLINGS:
            raise EmbregError(f"pooling={pooling!r} is not one of {POOLINGS}")
        device = torch.device(device) if device is not None else torch.device("cpu")
        self.block_rows, self.block_dims, self.embedding_dim = rows, dims, base_dim
        self.num_embeddings = sum(rows)
        self.table_dims = tuple(dim_multiple * math.ceil(d / dim_multiple) for d in dims)
        self.feature, self.pooling, self.init_std = feature, pooling, float(init_std)
        self.block_features = tuple(f"{feature}_block{i}" for i in range(len(rows)))
        self.ebc = EmbeddingBagCollection(
            tables=[
                EmbeddingBagConfig(
                    name=name, embedding_dim=t, num_embeddings=n, feature_names=[name], pooling=PoolingType.SUM
                )
                for name, n, t in zip(self.block_features, rows, self.table_dims)
            ],
            device=device,
        )
        self.projections = nn.ParameterDict(
            {str(i): nn.Parameter(torch.empty(d, base_dim, device=device)) for i, d in enumerate(dims) if d != base_dim}
        )
        offsets = torch.tensor([0, *torch.tensor(rows).cumsum(0).tolist()], dtype=torch.int64, device=device)
        self.register_buffer("offsets", offsets, persistent=False)
        if index_map is not None:
            index_map = torch.as_tensor(index_map)
            if index_map.shape != (self.num_embeddings,):
                raise EmbregError(f"index_map has shape {tuple(index_map.shape)}; expected ({self.num_embeddings},)")
            if not torch.equal(torch.sort(index_map.to(torch.int64).cpu()).values, torch.arange(self.num_embeddings)):
                raise EmbregError("index_map must be a permutation of 0..N-1 (each position exactly once)")
            index_map = index_map.to(device=device, dtype=torch.int64)
        self.register_buffer("index_map", index_map)
        self.reset_parameters()

    # ----------------------------------------------------------------------------------------------- building

    @classmethod
    def from_frequencies(
        cls,
        frequencies: Sequence[float] | torch.Tensor,
        *,
        num_blocks: int,
        alpha: float,
        base_dim: int | None = None,
        budget: float | None = None,
        min_dim: int = DIM_MULTIPLE,
        multiple_of: int = DIM_MULTIPLE,
        **kwargs,
    ) -> TorchRecMixedDimensionEmbedding:
        """Equipartition blocks (Alg. 3) sized by Alg. 1 at multiples of ``multiple_of`` (see
        :func:`power_law_dims_multiple_of`); the base dimension is ``base_dim`` or, from a budget alone, the
        largest block dimension.

        Args:
            frequencies: (N,) training query counts per caller id.
            num_blocks: k.
            alpha, base_dim, budget, min_dim, multiple_of: as :func:`power_law_dims_multiple_of`.
            kwargs: passed to the constructor (``feature``, ``pooling``, ``init_std``, ...).

        Example:
            >>> emb = TorchRecMixedDimensionEmbedding.from_frequencies(1000.0 / torch.arange(1, 501), num_blocks=4,
            ...                                                        alpha=0.3, base_dim=32)
            >>> emb.block_dims, emb.block_rows
            ((32, 20, 12, 8), (3, 13, 75, 409))
        """
        blocking = equipartition_blocks(frequencies, num_blocks)
        dims = power_law_dims_multiple_of(
            blocking.popularity,
            alpha,
            base_dim=base_dim,
            budget=budget,
            rows=blocking.rows,
            min_dim=min_dim,
            multiple_of=multiple_of,
        )
        kwargs.setdefault("dim_multiple", multiple_of)
        return cls(blocking.rows, dims, base_dim or max(dims), index_map=blocking.index_map(), **kwargs)

    @classmethod
    def from_mixed_dimension(
        cls,
        layer: MixedDimensionEmbedding | MixedDimensionEmbeddingBag,
        *,
        feature: str = "ids",
        dim_multiple: int = DIM_MULTIPLE,
        pad: bool = False,
    ) -> TorchRecMixedDimensionEmbedding:
        """The same layer as an EBC: same blocks, ``index_map``, rows and projections (copies), so the outputs
        are equal (up to float rounding in the projection's sum).

        A :class:`~embreg.embeddings.MixedDimensionEmbeddingBag` in ``sum`` or ``mean`` mode without
        ``padding_idx`` gives the matching ``pooling`` (its bags then come as a ``KeyedJaggedTensor``).

        Args:
            layer: an embreg MD layer (on the CPU or any device; the copy is made on the layer's device).
            feature, dim_multiple, pad: as the constructor; ``pad=True`` accepts any ``d_i``.
        """
        pooling = "sum"
        if isinstance(layer, MixedDimensionEmbeddingBag):
            if layer.mode not in POOLINGS or layer.padding_idx is not None:
                raise EmbregError(
                    f"a bag layer with mode={layer.mode!r} and padding_idx={layer.padding_idx} has no EBC form; "
                    f"the modes are {POOLINGS} without padding_idx"
                )
            pooling, layer = layer.mode, layer.embedding
        if not isinstance(layer, MixedDimensionEmbedding):
            raise EmbregError(f"layer must be a MixedDimensionEmbedding(Bag), got {type(layer).__name__}")
        new = cls(
            layer.block_rows,
            layer.block_dims,
            layer.embedding_dim,
            index_map=layer.index_map,
            feature=feature,
            pooling=pooling,
            dim_multiple=dim_multiple,
            pad=pad,
            init_std=layer.init_std,
            device=layer.offsets.device,
        )
        with torch.no_grad():
            for i, block in enumerate(layer.blocks):
                table = new.table_weight(i)
                table.zero_()
                table[:, : block.weight.shape[1]].copy_(block.weight)
                if block.projection is not None:
                    new.projections[str(i)].copy_(block.projection)
        return new

    def to_mixed_dimension(self) -> MixedDimensionEmbedding:
        """An embreg :class:`~embreg.embeddings.MixedDimensionEmbedding` with copies of these weights
        (unsharded modules only: a sharded table is spread over ranks)."""
        layer = MixedDimensionEmbedding(
            self.block_rows,
            self.block_dims,
            self.embedding_dim,
            index_map=self.index_map,
            init_std=self.init_std,
            device=self.offsets.device,
        )
        with torch.no_grad():
            for i, block in enumerate(layer.blocks):
                block.weight.copy_(self.table_weight(i)[:, : self.block_dims[i]])
                if block.projection is not None:
                    block.projection.copy_(self.projections[str(i)])
        return layer

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Rows N(0, init_std^2) (padding columns 0), projections N(0, 1 / d_i), as embreg's layer."""
        for i, d in enumerate(self.block_dims):
            table = self.table_weight(i)
            table.zero_()
            nn.init.normal_(table[:, :d], std=self.init_std)
            if str(i) in self.projections:
                nn.init.normal_(self.projections[str(i)], std=d**-0.5)

    def table_weight(self, block: int) -> torch.Tensor:
        """The (n_i, table_dims[i]) weight of block ``i``'s table in the unsharded EBC (the parameter itself)."""
        bags = getattr(self.ebc, "embedding_bags", None)
        if not isinstance(bags, nn.ModuleDict):
            raise EmbregError("the tables are sharded (DistributedModelParallel); read them through its state_dict")
        return cast(torch.Tensor, bags[self.block_features[block]].weight)

    # ------------------------------------------------------------------------------------------------ reading

    @property
    def num_blocks(self) -> int:
        """k."""
        return len(self.block_rows)

    @property
    def num_parameters(self) -> int:
        """Stored parameters: table rows ``sum n_i * table_dims[i]`` plus projections ``sum_{d_i != D} d_i D``."""
        rows = sum(n * t for n, t in zip(self.block_rows, self.table_dims))
        return rows + sum(d * self.embedding_dim for d in self.block_dims if d != self.embedding_dim)

    def block_features_of(self, values: torch.Tensor, lengths: torch.Tensor) -> KeyedJaggedTensor:
        """The EBC input for B bags of caller ids: each id moves to its block's feature as its local row.

        Args:
            values: (M,) caller ids of all bags, bag after bag.
            lengths: (B,) ids per bag.

        Returns:
            A ``KeyedJaggedTensor`` with keys ``block_features`` and B bags per key; bag b of block i holds the
            local rows ``x - t_i`` of the ids of bag b in block i, in their order.
        """
        check_ids(values, self.num_embeddings)
        positions = values.to(torch.int64)
        if self.index_map is not None:
            positions = self.index_map.index_select(0, positions)
        block = torch.searchsorted(self.offsets[1:], positions, right=True)
        local = positions - self.offsets.index_select(0, block)
        num_bags = lengths.numel()
        bag = torch.repeat_interleave(torch.arange(num_bags, device=values.device), lengths.to(torch.int64))
        slot = block * num_bags + bag  # key-major, as a KeyedJaggedTensor lays out its bags
        order = torch.argsort(slot, stable=True)
        return KeyedJaggedTensor(
            keys=list(self.block_features),
            values=local.index_select(0, order),
            lengths=torch.bincount(slot, minlength=self.num_blocks * num_bags),
        )

    def _stacked_projection(self, like: torch.Tensor) -> torch.Tensor:
        """(sum_i table_dims[i], D): ``P_i`` (or the identity) for the first d_i rows of block i, zeros below."""
        parts = []
        for i, (d, t) in enumerate(zip(self.block_dims, self.table_dims)):
            key = str(i)
            parts.append(
                self.projections[key] if key in self.projections else torch.eye(d, dtype=like.dtype, device=like.device)
            )
            if t > d:
                parts.append(like.new_zeros(t - d, self.embedding_dim))
        return torch.cat(parts, dim=0)

    def pooled(self, values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, D) pooled vectors of B bags of caller ids (``values`` (M,), ``lengths`` (B,))."""
        out = self.ebc(self.block_features_of(values, lengths))
        if list(out.keys()) == list(self.block_features):
            concatenated = out.values()
        else:  # a sharded EBC may order its output keys otherwise
            per_key = out.to_dict()
            concatenated = torch.cat([per_key[f] for f in self.block_features], dim=1)
        vectors = concatenated @ self._stacked_projection(concatenated)
        if self.pooling == "mean":
            vectors = vectors / lengths.clamp_min(1).to(vectors.dtype).unsqueeze(-1)
        return vectors

    def forward(self, ids: torch.Tensor | KeyedJaggedTensor) -> torch.Tensor:
        """Vectors ``(..., D)`` of caller ids ``(...)``, or pooled ``(B, D)`` of key ``feature`` of a KJT."""
        if isinstance(ids, KeyedJaggedTensor):
            if self.feature not in ids.keys():
                raise EmbregError(f"the KeyedJaggedTensor has keys {ids.keys()}; this layer reads {self.feature!r}")
            bags = ids[self.feature]
            if bags.weights_or_none() is not None:
                raise EmbregError("weighted KeyedJaggedTensors are not supported (pooling is sum or mean)")
            return self.pooled(bags.values(), bags.lengths())
        if not isinstance(ids, torch.Tensor):
            raise EmbregError(f"ids must be a tensor of ids or a KeyedJaggedTensor, got {type(ids).__name__}")
        check_ids(ids, self.num_embeddings)
        flat = ids.reshape(-1)
        if flat.numel() == 0:
            return torch.zeros(*ids.shape, self.embedding_dim, device=self.offsets.device)
        vectors = self.pooled(flat, torch.ones_like(flat, dtype=torch.int64))
        return vectors.reshape(*ids.shape, self.embedding_dim)

    def extra_repr(self) -> str:
        return (
            f"{self.num_embeddings}, {self.embedding_dim}, feature={self.feature!r}, dims={list(self.block_dims)}"
            + (f", table_dims={list(self.table_dims)}" if self.table_dims != self.block_dims else "")
            + (f", pooling={self.pooling!r}" if self.pooling != "sum" else "")
        )


def table_wise_plan(
    module: TorchRecMixedDimensionEmbedding,
    world_size: int,
    *,
    path: str = "",
    ranks: Sequence[int] | None = None,
    device_type: str = "cpu",
    compute_kernel: str = "fused",
) -> ShardingPlan:
    """A DMP sharding plan that puts each MD block (table) whole on one rank, round robin by default.

    Table-wise is the sharding that TorchRec 1.9 offers on the CPU beside data-parallel and column-wise
    (row-wise needs a GPU); every table dimension must be divisible by 4.

    Args:
        module: the layer (unsharded).
        world_size: ranks in the process group.
        path: the module's path inside the model given to DMP (``""`` when it is the model itself).
        ranks: the rank of each block (default: block i on rank ``i % world_size``).
        device_type: ``cpu`` or ``cuda``.
        compute_kernel: TorchRec compute kernel (``fused``: FBGEMM's table-batched kernel with the optimizer
            fused into backward; ``dense``).

    Returns:
        A ``ShardingPlan`` for ``DistributedModelParallel(model, plan=...)``.
    """
    world_size = check_int(world_size, "world_size", 1)
    ranks = list(ranks) if ranks is not None else [i % world_size for i in range(module.num_blocks)]
    if len(ranks) != module.num_blocks:
        raise EmbregError(f"ranks has {len(ranks)} entries; the module has {module.num_blocks} blocks")
    for i, r in enumerate(ranks):
        check_int(r, f"ranks[{i}]", 0, world_size - 1)
    per_table = {
        name: table_wise(rank=rank, compute_kernel=compute_kernel) for name, rank in zip(module.block_features, ranks)
    }
    module_plan = construct_module_sharding_plan(
        module.ebc, per_table, local_size=world_size, world_size=world_size, device_type=device_type
    )
    return ShardingPlan({f"{path}.ebc" if path else "ebc": module_plan})

"""``MixedDimensionEmbedding``: a drop-in ``nn.Embedding`` whose rows live in blocks of different dimensions.

mixed-dimension-embeddings.txt, Sec. III and Fig. 1: the layer holds ``k`` blocks ``E_i`` (n_i x d_i) and
projections ``P_i`` (d_i x d_bar); the row at position ``x`` of block ``i`` is ``E_i[x - t_i] @ P_i``. Blocks
with ``d_i == d_bar`` have no projection (identity). All ``E_i`` live in one flat parameter and all ``P_i`` in
another. An optional index map sends the caller's ids to positions in the blocked order (the permutation of
Alg. 3), so callers keep their own ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from embreg.embeddings._checks import check_block_layout, check_ids
from embreg.embeddings._kernel import fused_kernel
from embreg.embeddings.blocking import Blocking
from embreg.embeddings.flat import flat_mixed_dimension_lookup, split_flat
from embreg.embeddings.sizing import md_parameter_count
from embreg.errors import EmbregError

__all__ = ["EmbeddingBlock", "MixedDimensionEmbedding"]


class EmbeddingBlock:
    """Block ``i`` of a :class:`MixedDimensionEmbedding`: its table ``E_i`` and projection ``P_i`` as views of the
    layer's flat parameters (writes through them change the layer), and their gradients.

    Attributes:
        weight: (n_i, d_i) view of ``layer.flat_rows``.
        projection: (d_i, D) view of ``layer.flat_projections``, or None (identity block, d_i == D).

    Example:
        >>> layer = MixedDimensionEmbedding([2, 3], [4, 2], base_dim=4)
        >>> [tuple(b.weight.shape) for b in layer.blocks], layer.blocks[0].projection is None
        ([(2, 4), (3, 2)], True)
    """

    def __init__(
        self, layer: MixedDimensionEmbedding, index: int, weight: torch.Tensor, projection: torch.Tensor | None
    ) -> None:
        self.layer, self.index, self.weight, self.projection = layer, index, weight, projection

    @property
    def weight_grad(self) -> torch.Tensor | None:
        """The dense (n_i, d_i) gradient of ``E_i`` from ``layer.flat_rows.grad`` (None before a backward)."""
        grad = self.layer.flat_rows.grad
        if grad is None:
            return None
        weights, _ = split_flat(
            grad.to_dense() if grad.is_sparse else grad, self.layer.flat_projections, *self.layer.layout
        )
        return weights[self.index]

    @property
    def projection_grad(self) -> torch.Tensor | None:
        """The (d_i, D) gradient of ``P_i`` (None for an identity block or before a backward)."""
        flat_projections = self.layer.flat_projections
        if self.projection is None or flat_projections is None:  # (a projection is a view of flat_projections)
            return None
        grad = flat_projections.grad
        if grad is None:
            return None
        return split_flat(None, grad, *self.layer.layout)[1][self.index]

    def __repr__(self) -> str:
        rows, dim = self.weight.shape
        tail = " (identity)" if self.projection is None else f" -> {self.projection.shape[1]}"
        return f"EmbeddingBlock({rows}, {dim}{tail})"


class MixedDimensionEmbedding(nn.Module):
    """Embedding with ``k`` blocks of rows at dimensions ``d_i``, each projected to the base dimension D.

    Same call as ``nn.Embedding``: ``forward(ids (...)) -> (..., D)``. The forward pass is Alg. 2 of
    mixed-dimension-embeddings.txt (vectorised, see
    :func:`embreg.embeddings.flat.flat_mixed_dimension_lookup`); it is differentiable in every ``E_i``
    and ``P_i``.

    Storage: two parameters, ``flat_rows`` (every block's rows ``E_i``, row-major, one after the other) and
    ``flat_projections`` (the ``P_i`` of the blocks with ``d_i != D``, in block order; None when every
    ``d_i == D``), so autograd and the optimizer handle two tensors instead of 2k (a step's fixed cost).
    ``layer.blocks[i].weight`` / ``.projection`` are views of them; ``.weight_grad`` / ``.projection_grad``
    their gradients (a block no id of the batch fell in gets zeros). Checkpoints written with one parameter per
    block (``blocks.{i}.weight``, ``blocks.{i}.projection``) still load.

    With ``sparse=True``, ``flat_rows`` gets a sparse gradient (one entry per value of each distinct row of the
    batch; use ``torch.optim.SparseAdam`` or SGD for it) and ``flat_projections`` a dense one.

    Rows start as N(0, init_std^2). Projections start as N(0, 1 / d_i), so a projected row has the same
    expected squared norm per coordinate as an unprojected one (a variance-preserving choice, in place of the
    paper's Xavier initialisation, that lets blocks of any dimension start at the scale of a uniform table).

    Args:
        block_rows: n_i per block, in blocked order.
        block_dims: d_i per block, each in [1, D].
        base_dim: D, the output dimension.
        index_map: (N,) position in the blocked order of each caller id (``Blocking.index_map()``); ``None``
            when the caller's ids already are positions. Stored as a buffer (int32 when it fits).
        sparse: a sparse gradient for the rows.
        init_std: standard deviation of the rows at initialisation (1.0, as ``nn.Embedding``).

    Shapes:
        ids: (...) integer ids in [0, N); output: (..., D).

    Example:
        >>> emb = MixedDimensionEmbedding([10, 90], [16, 4], base_dim=16)
        >>> emb(torch.tensor([[0, 50], [99, 3]])).shape
        torch.Size([2, 2, 16])
        >>> emb.num_parameters, emb.uniform_num_parameters
        (584, 1600)
        >>> tuple(emb.flat_rows.shape), tuple(emb.flat_projections.shape)
        ((520,), (64,))
    """

    # registered in __init__ (parameters and buffers), declared here for type checkers
    flat_rows: nn.Parameter
    flat_projections: nn.Parameter | None
    offsets: torch.Tensor
    index_map: torch.Tensor | None

    def __init__(
        self,
        block_rows: Sequence[int],
        block_dims: Sequence[int],
        base_dim: int,
        *,
        index_map: torch.Tensor | None = None,
        sparse: bool = False,
        init_std: float = 1.0,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        rows, dims, base_dim = check_block_layout(block_rows, block_dims, base_dim)
        self.num_embeddings = sum(rows)
        self.embedding_dim = base_dim
        self.sparse = bool(sparse)
        self.block_rows = rows
        self.block_dims = dims
        self.init_std = float(init_std)
        num_projection = sum(d * base_dim for d in dims if d != base_dim)
        self.flat_rows = nn.Parameter(torch.empty(sum(n * d for n, d in zip(rows, dims)), dtype=dtype, device=device))
        if num_projection:
            self.flat_projections = nn.Parameter(torch.empty(num_projection, dtype=dtype, device=device))
        else:  # every block at d_i == D: no projections, like nn.Linear(bias=False)
            self.register_parameter("flat_projections", None)
        offsets = torch.tensor([0, *torch.tensor(rows).cumsum(0).tolist()], dtype=torch.int64, device=device)
        self.register_buffer("offsets", offsets, persistent=False)
        if index_map is not None:
            index_map = torch.as_tensor(index_map)
            if index_map.shape != (self.num_embeddings,):
                raise EmbregError(f"index_map has shape {tuple(index_map.shape)}; expected ({self.num_embeddings},)")
            if not torch.equal(torch.sort(index_map.to(torch.int64)).values, torch.arange(self.num_embeddings)):
                raise EmbregError("index_map must be a permutation of 0..N-1 (each position exactly once)")
            small = self.num_embeddings < 2**31
            index_map = index_map.to(torch.int32 if small else torch.int64).to(device)
        self.register_buffer("index_map", index_map)
        self.reset_parameters()

    @classmethod
    def from_blocking(cls, blocking: Blocking, dims: Sequence[int], base_dim: int, **kwargs) -> MixedDimensionEmbedding:
        """The layer for ``blocking`` (rows per block and id permutation) at block dimensions ``dims``.

        Example:
            >>> from embreg.embeddings.blocking import equipartition_blocks
            >>> b = equipartition_blocks(torch.tensor([9.0, 1.0, 5.0, 1.0, 2.0, 1.0]), 2)
            >>> MixedDimensionEmbedding.from_blocking(b, [8, 2], 8)(torch.arange(6)).shape
            torch.Size([6, 8])
        """
        return cls(blocking.rows, dims, base_dim, index_map=blocking.index_map(), **kwargs)

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Rows N(0, init_std^2), projections N(0, 1 / d_i), block by block (rows, then projection)."""
        for block in self.blocks:
            nn.init.normal_(block.weight, std=self.init_std)
            if block.projection is not None:
                nn.init.normal_(block.projection, std=block.projection.shape[0] ** -0.5)

    @property
    def layout(self) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """(n_i per block, d_i per block, D): how the flat parameters split into blocks."""
        return self.block_rows, self.block_dims, self.embedding_dim

    @property
    def blocks(self) -> tuple[EmbeddingBlock, ...]:
        """The k blocks, as views of the flat parameters (made anew on each access)."""
        weights, projections = split_flat(self.flat_rows, self.flat_projections, *self.layout)
        return tuple(EmbeddingBlock(self, i, w, p) for i, (w, p) in enumerate(zip(weights, projections)))

    @property
    def num_blocks(self) -> int:
        """k."""
        return len(self.block_rows)

    @property
    def num_parameters(self) -> int:
        """Exact parameter count: rows ``sum n_i d_i`` plus projections ``sum_{d_i != D} d_i D``."""
        return md_parameter_count(self.block_rows, self.block_dims, self.embedding_dim)

    @property
    def uniform_num_parameters(self) -> int:
        """Parameters of a plain ``nn.Embedding(N, D)``: ``N * D``."""
        return self.num_embeddings * self.embedding_dim

    def positions(self, ids: torch.Tensor) -> torch.Tensor:
        """Checks ``ids`` (...) and maps them to int64 positions in the blocked order (...)."""
        check_ids(ids, self.num_embeddings)
        ids = ids.to(torch.int64)
        if self.index_map is not None:
            ids = self.index_map.index_select(0, ids.reshape(-1)).reshape(ids.shape).to(torch.int64)
        return ids

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Vectors ``(..., D)`` of the caller ids ``(...)``."""
        kernel = fused_kernel()  # called here, not through _kernel.fused_lookup: one Python call less per step
        if kernel is not None and isinstance(ids, torch.Tensor):
            # the fused kernel checks the ids' dtype and device and the parameters itself (None: it does not
            # serve them), and maps and range-checks the ids; a rejected id gets the library's error. The
            # parameters and buffers are read from their dicts, not through nn.Module.__getattr__ (a few
            # microseconds a step at small batches), unless something (e.g. a parametrization) moved them.
            try:
                rows, projections = self._parameters["flat_rows"], self._parameters["flat_projections"]
                index_map, offsets = self._buffers["index_map"], self._buffers["offsets"]
            except KeyError:
                rows, projections, index_map, offsets = (
                    self.flat_rows,
                    self.flat_projections,
                    self.index_map,
                    self.offsets,
                )
            try:
                out = kernel.lookup(
                    ids, index_map, offsets, self.sparse, rows, projections, self.block_dims, self.embedding_dim
                )
            except RuntimeError:
                check_ids(ids, self.num_embeddings)
                raise
            if out is not None:
                return out
        flat_projections: torch.Tensor | None = self.flat_projections
        if flat_projections is None:
            flat_projections = self.flat_rows.new_empty(0)
        return flat_mixed_dimension_lookup(
            self.positions(ids),
            self.flat_rows,
            flat_projections,
            self.block_rows,
            self.block_dims,
            self.offsets,
            self.embedding_dim,
            sparse=self.sparse,
        )

    def full_weight(self) -> torch.Tensor:
        """Every row's vector ``E_i[j] @ P_i`` as one differentiable ``(N, D)`` matrix, in caller id order.

        What an output layer that shares this table needs (SASRec's item scores, a tied softmax): a score against
        every row is ``h @ full_weight().T``, with gradients into every ``E_i`` and ``P_i``. It costs one
        ``(n_i, d_i) @ (d_i, D)`` product per block and N x D memory, so compute it once per step and reuse it.
        Row ``x`` equals ``self(x)``; the rows' gradient is dense even for a ``sparse=True`` layer.

        Example:
            >>> emb = MixedDimensionEmbedding([2, 3], [4, 2], base_dim=4, index_map=torch.tensor([4, 0, 1, 2, 3]))
            >>> full = emb.full_weight()
            >>> full.shape, torch.allclose(full, emb(torch.arange(5)))
            (torch.Size([5, 4]), True)
        """
        weights, projections = split_flat(self.flat_rows, self.flat_projections, *self.layout)
        blocked = torch.cat([w if p is None else w @ p for w, p in zip(weights, projections)])  # (N, D) blocked
        if self.index_map is None:
            return blocked
        return blocked.index_select(0, self.index_map.to(torch.int64))

    @torch.no_grad()
    def materialize(self) -> torch.Tensor:
        """The full (N, D) table ``E_i @ P_i`` in caller id order (for inspection or export; memory N x D)."""
        return self(torch.arange(self.num_embeddings, device=self.offsets.device))

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        """Loads the two flat parameters, or builds them from a checkpoint with one parameter per block."""
        if prefix + "flat_rows" not in state_dict and prefix + "blocks.0.weight" in state_dict:
            _upgrade_per_block_state(state_dict, prefix, self.layout)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        return (
            f"{self.num_embeddings}, {self.embedding_dim}, blocks={self.num_blocks}, dims={list(self.block_dims)}"
            + (", sparse=True" if self.sparse else "")
        )


def _upgrade_per_block_state(state_dict: dict, prefix: str, layout: tuple) -> None:
    """Replaces the keys ``blocks.{i}.weight`` / ``blocks.{i}.projection`` of a per-block checkpoint (embreg
    before the flat storage) by ``flat_rows`` / ``flat_projections``, in place; a shape that does not fit the
    layer raises, naming the key."""
    block_rows, block_dims, base_dim = layout
    rows: list[torch.Tensor] = []
    projections: list[torch.Tensor] = []
    for i, (n, d) in enumerate(zip(block_rows, block_dims)):
        expected = {"weight": (n, d), "projection": (d, base_dim) if d != base_dim else None}
        for name, shape in expected.items():
            key = f"{prefix}blocks.{i}.{name}"
            tensor = state_dict.pop(key, None)
            if shape is None:
                if tensor is not None:
                    raise EmbregError(f"checkpoint key {key!r}: block {i} has d_i = D = {base_dim}, so no projection")
                continue
            if tensor is None or tuple(tensor.shape) != shape:
                found = "missing" if tensor is None else f"shape {tuple(tensor.shape)}"
                raise EmbregError(f"checkpoint key {key!r} is {found}; this layer needs shape {shape}")
            (rows if name == "weight" else projections).append(tensor.reshape(-1))
    state_dict[prefix + "flat_rows"] = torch.cat(rows)
    if projections:
        state_dict[prefix + "flat_projections"] = torch.cat(projections)

"""``MixedDimensionEmbedding``: a drop-in ``nn.Embedding`` whose rows live in blocks of different dimensions.

mixed-dimension-embeddings.txt, Sec. III and Fig. 1: the layer holds ``k`` blocks ``E_i`` (n_i x d_i) and
projections ``P_i`` (d_i x d_bar); the row at position ``x`` of block ``i`` is ``E_i[x - t_i] @ P_i``. Blocks
with ``d_i == d_bar`` have no projection (identity). An optional index map sends the caller's ids to positions
in the blocked order (the permutation of Alg. 3), so callers keep their own ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from embreg.embeddings._checks import ID_DTYPES, check_ids, check_int, check_sizes
from embreg.embeddings._kernel import fused_lookup
from embreg.embeddings.blocking import Blocking
from embreg.embeddings.functional import mixed_dimension_lookup
from embreg.embeddings.sizing import md_parameter_count
from embreg.errors import EmbregError

__all__ = ["EmbeddingBlock", "MixedDimensionEmbedding"]


class EmbeddingBlock(nn.Module):
    """One block: a table ``weight`` (n_i, d_i) and a projection (d_i, D), or no projection when d_i == D.

    The rows start as N(0, init_std^2). The projection starts as N(0, 1 / d_i), so a projected row has the
    same expected squared norm per coordinate as an unprojected one (a variance-preserving choice, in place of
    the paper's Xavier initialisation, that lets blocks of any dimension start at the scale of a uniform table).

    Args:
        num_rows: n_i.
        dim: d_i.
        base_dim: D.
        init_std: standard deviation of the rows at initialisation.

    Example:
        >>> EmbeddingBlock(10, 4, 8).projection.shape
        torch.Size([4, 8])
        >>> EmbeddingBlock(10, 8, 8).projection is None
        True
    """

    def __init__(self, num_rows: int, dim: int, base_dim: int, *, init_std: float = 1.0,
                 dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> None:
        super().__init__()
        if dim > base_dim:
            raise EmbregError(f"block dim={dim} is outside the valid range [1, base_dim={base_dim}]")
        self.init_std = float(init_std)
        self.weight = nn.Parameter(torch.empty(num_rows, dim, dtype=dtype, device=device))
        if dim == base_dim:
            self.register_parameter("projection", None)
        else:
            self.projection = nn.Parameter(torch.empty(dim, base_dim, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, std=self.init_std)
        if self.projection is not None:
            nn.init.normal_(self.projection, std=self.projection.shape[0] ** -0.5)

    def extra_repr(self) -> str:
        rows, dim = self.weight.shape
        out = dim if self.projection is None else self.projection.shape[1]
        return f"{rows}, {dim}" + (" (identity)" if self.projection is None else f" -> {out}")


class MixedDimensionEmbedding(nn.Module):
    """Embedding with ``k`` blocks of rows at dimensions ``d_i``, each projected to the base dimension D.

    Same call as ``nn.Embedding``: ``forward(ids (...)) -> (..., D)``. The forward pass is Alg. 2 of
    mixed-dimension-embeddings.txt (vectorised, see :func:`embreg.embeddings.functional.mixed_dimension_lookup`);
    it is differentiable in every ``E_i`` and ``P_i``. With ``sparse=True`` the block tables get sparse
    gradients (use ``torch.optim.SparseAdam`` or SGD for them) and projections dense ones.

    Args:
        block_rows: n_i per block, in blocked order.
        block_dims: d_i per block, each in [1, D].
        base_dim: D, the output dimension.
        index_map: (N,) position in the blocked order of each caller id (``Blocking.index_map()``); ``None``
            when the caller's ids already are positions. Stored as a buffer (int32 when it fits).
        sparse: sparse gradients for the block tables.
        init_std: standard deviation of the rows at initialisation (1.0, as ``nn.Embedding``).

    Shapes:
        ids: (...) integer ids in [0, N); output: (..., D).

    Example:
        >>> emb = MixedDimensionEmbedding([10, 90], [16, 4], base_dim=16)
        >>> emb(torch.tensor([[0, 50], [99, 3]])).shape
        torch.Size([2, 2, 16])
        >>> emb.num_parameters, emb.uniform_num_parameters
        (584, 1600)
    """

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
        rows = check_sizes(block_rows, "block_rows")
        dims = check_sizes(block_dims, "block_dims")
        base_dim = check_int(base_dim, "base_dim", 1)
        if len(rows) != len(dims):
            raise EmbregError(f"block_rows has {len(rows)} entries but block_dims has {len(dims)}; they must match")
        for i, d in enumerate(dims):
            if d > base_dim:
                raise EmbregError(f"block_dims[{i}]={d} is outside the valid range [1, base_dim={base_dim}]")
        self.num_embeddings = sum(rows)
        self.embedding_dim = base_dim
        self.sparse = bool(sparse)
        self.block_rows = rows
        self.block_dims = dims
        self.blocks = nn.ModuleList(
            EmbeddingBlock(n, d, base_dim, init_std=init_std, dtype=dtype, device=device) for n, d in zip(rows, dims))
        offsets = torch.tensor([0, *torch.tensor(rows).cumsum(0).tolist()], dtype=torch.int64, device=device)
        self.register_buffer("offsets", offsets, persistent=False)
        if index_map is not None:
            index_map = torch.as_tensor(index_map)
            if index_map.shape != (self.num_embeddings,):
                raise EmbregError(f"index_map has shape {tuple(index_map.shape)}; expected ({self.num_embeddings},)")
            if not torch.equal(torch.sort(index_map.to(torch.int64)).values, torch.arange(self.num_embeddings)):
                raise EmbregError("index_map must be a permutation of 0..N-1 (each position exactly once)")
            small = self.num_embeddings < 2 ** 31
            index_map = index_map.to(torch.int32 if small else torch.int64).to(device)
        self.register_buffer("index_map", index_map)

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

    @property
    def num_blocks(self) -> int:
        """k."""
        return len(self.blocks)

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
        weights = [block.weight for block in self.blocks]
        projections = [block.projection for block in self.blocks]
        if (self.num_blocks > 1 and isinstance(ids, torch.Tensor) and ids.dtype in ID_DTYPES and ids.numel() > 0
                and ids.device.type == "cpu"):
            # the fused kernel maps and range-checks the ids itself; a rejected id gets the library's error
            try:
                out = fused_lookup(ids, self.index_map, weights, projections, self.offsets, sparse=self.sparse)
            except RuntimeError:
                check_ids(ids, self.num_embeddings)
                raise
            if out is not None:
                return out
        return mixed_dimension_lookup(self.positions(ids), weights, projections, self.offsets, sparse=self.sparse)

    @torch.no_grad()
    def materialize(self) -> torch.Tensor:
        """The full (N, D) table ``E_i @ P_i`` in caller id order (for inspection or export; memory N x D)."""
        return self(torch.arange(self.num_embeddings, device=self.offsets.device))

    def extra_repr(self) -> str:
        return (f"{self.num_embeddings}, {self.embedding_dim}, blocks={self.num_blocks}, dims={list(self.block_dims)}"
                + (", sparse=True" if self.sparse else ""))

"""``MixedDimensionEmbeddingBag``: pooled mixed-dimension look-ups for multi-hot fields (drop-in ``nn.EmbeddingBag``).

mixed-dimension-embeddings.txt, Appendix F: Alg. 2 "may be generalized to support multi-hot lookups, where
embedding vectors corresponding to z query indices are fetched and reduced by a differentiable operator". Each
id is looked up and projected to the base dimension, then the bag is reduced by sum, mean or max.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from embreg.embeddings._checks import check_int, holds_value
from embreg.embeddings.blocking import Blocking
from embreg.embeddings.mixed_dimension import MixedDimensionEmbedding
from embreg.errors import EmbregError

__all__ = ["MixedDimensionEmbeddingBag"]

MODES = ("sum", "mean", "max")


class MixedDimensionEmbeddingBag(nn.Module):
    """Sums, averages or takes the maximum of mixed-dimension vectors over bags of ids.

    The call matches ``nn.EmbeddingBag``: ``forward(input (B, L))`` pools each row, or
    ``forward(input (M,), offsets (B,))`` pools ``input[offsets[b]:offsets[b+1]]``; output (B, D). Ids equal to
    ``padding_idx`` are skipped (and not counted by ``mean``); empty bags give zeros. ``per_sample_weights``
    (same shape as ``input``) scale each vector before a ``sum``.

    Args:
        block_rows, block_dims, base_dim, index_map, sparse, init_std: as :class:`MixedDimensionEmbedding`.
        mode: ``sum``, ``mean`` (default, as ``nn.EmbeddingBag``) or ``max``.
        padding_idx: an id that marks padding, or ``None``.

    Example:
        >>> bag = MixedDimensionEmbeddingBag([2, 6], [8, 2], base_dim=8, mode="sum", padding_idx=7)
        >>> bag(torch.tensor([[0, 3, 7], [7, 7, 7]])).shape
        torch.Size([2, 8])
    """

    def __init__(
        self,
        block_rows: Sequence[int],
        block_dims: Sequence[int],
        base_dim: int,
        *,
        mode: str = "mean",
        padding_idx: int | None = None,
        **kwargs,
    ) -> None:
        super().__init__()
        self.embedding = MixedDimensionEmbedding(block_rows, block_dims, base_dim, **kwargs)
        self._configure(mode, padding_idx)

    def _configure(self, mode: str, padding_idx: int | None) -> None:
        if mode not in MODES:
            raise EmbregError(f"mode={mode!r} is not one of {MODES}")
        if padding_idx is not None:
            padding_idx = check_int(padding_idx, "padding_idx", 0, self.embedding.num_embeddings - 1)
        self.mode = mode
        self.padding_idx = padding_idx

    @classmethod
    def from_embedding(
        cls, embedding: MixedDimensionEmbedding, *, mode: str = "mean", padding_idx: int | None = None
    ) -> MixedDimensionEmbeddingBag:
        """A bag layer that pools the vectors of an existing :class:`MixedDimensionEmbedding` (shared weights)."""
        bag = cls.__new__(cls)
        nn.Module.__init__(bag)
        bag.embedding = embedding
        bag._configure(mode, padding_idx)
        return bag

    @classmethod
    def from_blocking(
        cls,
        blocking: Blocking,
        dims: Sequence[int],
        base_dim: int,
        *,
        mode: str = "mean",
        padding_idx: int | None = None,
        **kwargs,
    ) -> MixedDimensionEmbeddingBag:
        """The bag layer for ``blocking`` at block dimensions ``dims`` (as the embedding's ``from_blocking``)."""
        return cls.from_embedding(
            MixedDimensionEmbedding.from_blocking(blocking, dims, base_dim, **kwargs),
            mode=mode,
            padding_idx=padding_idx,
        )

    @property
    def num_embeddings(self) -> int:
        return self.embedding.num_embeddings

    @property
    def embedding_dim(self) -> int:
        return self.embedding.embedding_dim

    @property
    def num_parameters(self) -> int:
        return self.embedding.num_parameters

    def _bag_index(self, input: torch.Tensor, offsets: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, int]:
        if input.ndim == 2:
            if offsets is not None:
                raise EmbregError("offsets must be None when input is 2-d (B, L); each row is one bag")
            num_bags, length = input.shape
            bag = torch.arange(num_bags, device=input.device).repeat_interleave(length)
            return input.reshape(-1), bag, num_bags
        if input.ndim == 1:
            if offsets is None or offsets.ndim != 1:
                raise EmbregError("a 1-d input needs 1-d offsets (B,) giving where each bag starts")
            num_bags = offsets.numel()
            if num_bags and (
                int(offsets[0]) != 0 or bool((offsets[1:] < offsets[:-1]).any()) or int(offsets[-1]) > input.numel()
            ):
                raise EmbregError(f"offsets must start at 0, not decrease and stay <= len(input)={input.numel()}")
            position = torch.arange(input.numel(), device=input.device)
            bag = torch.searchsorted(offsets.to(torch.int64), position, right=True) - 1
            return input, bag, num_bags
        raise EmbregError(f"input must be 2-d (B, L) or 1-d with offsets, got shape {tuple(input.shape)}")

    def forward(
        self, input: torch.Tensor, offsets: torch.Tensor | None = None, per_sample_weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Pooled vectors (B, D) of bags of caller ids: ``input`` (B, L), or (M,) with ``offsets`` (B,)."""
        ids, bag, num_bags = self._bag_index(input, offsets)
        weights = None
        if per_sample_weights is not None:
            if self.mode != "sum":
                raise EmbregError(f"per_sample_weights needs mode='sum', got mode={self.mode!r}")
            if per_sample_weights.shape != input.shape:
                raise EmbregError(
                    f"per_sample_weights has shape {tuple(per_sample_weights.shape)}; "
                    f"expected the shape of input {tuple(input.shape)}"
                )
            weights = per_sample_weights.reshape(-1)
        if self.padding_idx is not None and holds_value(ids.dtype, self.padding_idx):  # else no id is padding
            keep = ids != self.padding_idx
            ids, bag = ids[keep], bag[keep]
            weights = weights[keep] if weights is not None else None
        vectors = self.embedding(ids)
        if weights is not None:
            vectors = vectors * weights.unsqueeze(-1).to(vectors.dtype)
        out = vectors.new_zeros(num_bags, self.embedding_dim)
        if self.mode == "max":
            index = bag.unsqueeze(-1).expand_as(vectors)
            return out.scatter_reduce(0, index, vectors, reduce="amax", include_self=False)
        out = out.index_add(0, bag, vectors)
        if self.mode == "mean":
            counts = torch.bincount(bag, minlength=num_bags).clamp_min(1).to(out.dtype)
            out = out / counts.unsqueeze(-1)
        return out

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}" + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")

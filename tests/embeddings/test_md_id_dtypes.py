"""Ids of every integer dtype reach the mixed-dimension layers exactly (the same vectors as int64 ids) on both
lookup backends, and a padding id the dtype cannot hold never matches a real id."""

from __future__ import annotations

import pytest
import torch

from embreg.embeddings import MixedDimensionEmbedding, MixedDimensionEmbeddingBag
from embreg.errors import EmbregError

DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32]
N = 300  # more ids than int8 and uint8 hold: narrow ids address the first rows only


def _ids(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    high = min(N, torch.iinfo(dtype).max + 1)
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_integer_dtype_looks_up_the_int64_vectors(md_backend: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    layer = MixedDimensionEmbedding([100, 200], [8, 2], base_dim=8, index_map=torch.randperm(N))
    ids = _ids(dtype, (16, 30))
    out = layer(ids.to(dtype))
    assert torch.equal(out, layer(ids))
    out.sum().backward()  # gradients flow from narrow ids too
    assert layer.flat_rows.grad is not None and layer.flat_rows.grad.abs().sum() > 0


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16])
def test_negative_narrow_ids_are_refused(md_backend: str, dtype: torch.dtype) -> None:
    layer = MixedDimensionEmbedding([100, 200], [8, 2], base_dim=8)
    with pytest.raises(EmbregError, match="holds the id -3; valid ids are in"):
        layer(torch.tensor([1, -3, 2], dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_bags_of_narrow_ids_pool_the_int64_bags(md_backend: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    bag = MixedDimensionEmbeddingBag([100, 200], [8, 2], base_dim=8, mode="mean", padding_idx=5)
    ids = _ids(dtype, (6, 12))
    ids[:, :3] = 5
    assert torch.equal(bag(ids.to(dtype)), bag(ids))


def test_a_padding_id_the_dtype_cannot_hold_skips_nothing(md_backend: str) -> None:
    torch.manual_seed(0)
    bag = MixedDimensionEmbeddingBag([100, 200], [8, 2], base_dim=8, mode="sum", padding_idx=256 + 43)
    ids = torch.tensor([[43, 1], [43, 43]])  # comparing uint8 ids with 299 wraps it to 43
    assert torch.equal(bag(ids.to(torch.uint8)), bag(ids))
    assert bag(ids.to(torch.uint8)).abs().sum(1).min() > 0

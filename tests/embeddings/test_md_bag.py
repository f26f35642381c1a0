"""MixedDimensionEmbeddingBag: equals nn.EmbeddingBag at identity, pools projected vectors, gradients, errors."""

import pytest
import torch
from torch import nn

from embreg.embeddings import MixedDimensionEmbedding, MixedDimensionEmbeddingBag
from embreg.errors import EmbregError

pytestmark = pytest.mark.usefixtures("md_backend")  # every test on both lookup backends


def _pair(mode: str, padding_idx: int | None = None):
    torch.manual_seed(0)
    plain = nn.EmbeddingBag(10, 4, mode=mode, padding_idx=padding_idx)
    bag = MixedDimensionEmbeddingBag([10], [4], 4, mode=mode, padding_idx=padding_idx)
    with torch.no_grad():
        bag.embedding.blocks[0].weight.copy_(plain.weight)
    return plain, bag


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_identity_bag_equals_nn_embedding_bag_2d_and_offsets(mode):
    plain, bag = _pair(mode, padding_idx=9)
    ids = torch.tensor([[0, 1, 9], [9, 9, 9], [3, 3, 2]])
    assert torch.allclose(bag(ids), plain(ids))
    flat, offsets = torch.tensor([1, 2, 4, 5, 9, 6]), torch.tensor([0, 2, 2, 4])
    assert torch.allclose(bag(flat, offsets), plain(flat, offsets))


def test_per_sample_weights_match_nn_embedding_bag():
    plain, bag = _pair("sum")
    ids, w = torch.tensor([[0, 1], [2, 3]]), torch.tensor([[0.5, 2.0], [1.0, -1.0]])
    assert torch.allclose(bag(ids, per_sample_weights=w), plain(ids, per_sample_weights=w))
    bag.mode = "mean"
    with pytest.raises(EmbregError, match="mode='sum'"):
        bag(ids, per_sample_weights=w)


def test_mean_of_projected_vectors_and_gradients_reach_every_block():
    torch.manual_seed(0)
    emb = MixedDimensionEmbedding([2, 3, 5], [6, 3, 1], 6)
    bag = MixedDimensionEmbeddingBag.from_embedding(emb, mode="mean")
    ids = torch.tensor([[0, 3, 9], [1, 2, 4]])
    out = bag(ids)
    assert out.shape == (2, 6)
    assert torch.allclose(out, emb(ids).mean(1), atol=1e-6)
    out.sum().backward()
    for block in emb.blocks:
        assert block.weight_grad.abs().sum() > 0
        if block.projection is not None:
            assert block.projection_grad.abs().sum() > 0


def test_bag_errors_name_the_problem():
    bag = MixedDimensionEmbeddingBag([4], [2], 2)
    with pytest.raises(EmbregError, match="1-d offsets"):
        bag(torch.tensor([0, 1]))
    with pytest.raises(EmbregError, match=r"id 4; valid ids are in \[0, 3\]"):
        bag(torch.tensor([[0, 4]]))
    with pytest.raises(EmbregError, match="mode="):
        MixedDimensionEmbeddingBag([4], [2], 2, mode="median")
    with pytest.raises(EmbregError, match=r"padding_idx=4 is outside the valid range \[0, 3\]"):
        MixedDimensionEmbeddingBag([4], [2], 2, padding_idx=4)

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from embreg.embeddings import MixedDimensionEmbedding, MixedDimensionEmbeddingBag
from embreg.models import DLRM


def _batch(n=6):
    g = torch.Generator().manual_seed(0)
    return {
        "categorical": torch.stack([torch.randint(0, 5, (n,), generator=g), torch.randint(0, 7, (n,), generator=g)], 1),
        "bags": torch.randint(0, 4, (n, 1, 3), generator=g),
        "dense": torch.randn(n, 3, generator=g),
        "label": (torch.rand(n, generator=g) > 0.5).float(),
    }


def test_interactions_are_the_pairwise_dots_of_bottom_and_field_vectors():
    torch.manual_seed(0)
    model = DLRM([nn.Embedding(5, 4), nn.Embedding(7, 4)], num_dense=3)
    batch = _batch()
    out = model(batch)
    x = model.bottom(batch["dense"])
    e1, e2 = model.embeddings[0](batch["categorical"][:, 0]), model.embeddings[1](batch["categorical"][:, 1])
    expected = torch.stack([(e1 * x).sum(-1), (e2 * x).sum(-1), (e2 * e1).sum(-1)], 1)
    assert torch.allclose(out.hidden["interactions"], expected, atol=1e-6)
    assert torch.allclose(out.predictions, model.top(torch.cat([x, expected], 1)).squeeze(-1), atol=1e-6)
    assert model.loss(batch, out).item() == pytest.approx(
        F.binary_cross_entropy_with_logits(out.predictions, batch["label"]).item()
    )


def test_mixed_dimension_fields_and_bags_train():
    torch.manual_seed(0)
    fields = [MixedDimensionEmbedding([5], [8], 8), MixedDimensionEmbedding([7], [2], 8)]
    bags = [MixedDimensionEmbeddingBag([4], [3], 8, mode="mean", padding_idx=3)]
    model = DLRM(fields, num_dense=3, bag_embeddings=bags, bottom_mlp=(8,), top_mlp=(8,))
    batch = _batch(64)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    first = model.loss(batch, model(batch)).item()
    for _ in range(30):
        optimizer.zero_grad()
        model.loss(batch, model(batch)).backward()
        optimizer.step()
    assert model.loss(batch, model(batch)).item() < first - 0.1  # it can fit 64 examples
    assert all(p.grad is not None for p in model.parameters())


def test_no_dense_features_and_bad_arguments():
    model = DLRM([nn.Embedding(5, 4), nn.Embedding(7, 4)], num_dense=0)
    batch = _batch()
    assert model.bottom is None and model(batch).predictions.shape == (6,)
    assert model.top[0].in_features == 1
    with pytest.raises(ValueError, match="at least one"):
        DLRM([], num_dense=3)
    with pytest.raises(ValueError, match="num_dense=-1"):
        DLRM([nn.Embedding(5, 4)], num_dense=-1)

import pytest
import torch
from torch import nn

from embreg.embeddings import MixedDimensionEmbedding
from embreg.models import NCF


def _batch():
    return {"user": torch.tensor([0, 1, 2]), "item": torch.tensor([3, 4, 3]), "rating": torch.tensor([4.0, 2.0, 5.0])}


def test_prediction_fuses_gmf_and_mlp_branches():
    torch.manual_seed(0)
    model = NCF(nn.Embedding(5, 8), nn.Embedding(6, 8), global_mean=3.5).eval()
    batch = _batch()
    u, v = model.user_embedding(batch["user"]), model.item_embedding(batch["item"])
    expected = 3.5 + model.output(torch.cat([u * v, model.mlp(torch.cat([u, v], -1))], -1)).squeeze(-1)
    out = model(batch)
    assert torch.allclose(out.predictions, expected)
    assert model.loss(batch, out).item() == pytest.approx((out.predictions - batch["rating"]).pow(2).mean().item())


def test_mlp_is_128_128_32_with_leaky_relu():
    model = NCF(nn.Embedding(5, 8), nn.Embedding(6, 8))
    widths = [m.out_features for m in model.mlp if isinstance(m, nn.Linear)]
    assert widths == [128, 128, 32]
    assert sum(isinstance(m, nn.LeakyReLU) for m in model.mlp) == 3
    assert model.mlp[0].in_features == 16 and model.output.in_features == 8 + 32


def test_mixed_dimension_tables_drop_in_and_get_gradients():
    users = MixedDimensionEmbedding([2, 3], [8, 2], 8)
    items = MixedDimensionEmbedding([3, 3], [8, 4], 8)
    model = NCF(users, items, mlp_dims=(16, 4), global_mean=3.0)
    batch = {"user": torch.tensor([0, 4]), "item": torch.tensor([1, 5]), "rating": torch.tensor([4.0, 1.0])}
    model.loss(batch, model(batch)).backward()
    for table in (users, items):
        for block in table.blocks:
            assert block.weight_grad.abs().sum() > 0


def test_separate_mlp_tables_and_bad_arguments():
    model = NCF(
        nn.Embedding(5, 8),
        nn.Embedding(6, 8),
        mlp_user_embedding=nn.Embedding(5, 3),
        mlp_item_embedding=nn.Embedding(6, 3),
        mlp_dims=(4,),
    )
    assert model.mlp[0].in_features == 6 and model(_batch()).predictions.shape == (3,)
    with pytest.raises(ValueError, match="both"):
        NCF(nn.Embedding(5, 8), nn.Embedding(6, 8), mlp_user_embedding=nn.Embedding(5, 3))
    with pytest.raises(ValueError, match="dropout=1.0"):
        NCF(nn.Embedding(5, 8), nn.Embedding(6, 8), dropout=1.0)

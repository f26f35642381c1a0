import pytest
import torch
from torch import nn

from embreg.models import BiasedMF
from embreg.sse import SSE, SSEEmbedding


def _batch():
    return {"user": torch.tensor([0, 1, 2]), "item": torch.tensor([3, 4, 3]), "rating": torch.tensor([4.0, 2.0, 5.0])}


def test_prediction_is_mean_plus_biases_plus_dot():
    mf = BiasedMF.build(5, 6, 3, global_mean=3.5)
    with torch.no_grad():
        mf.user_bias.weight.fill_(0.25)
        mf.item_bias.weight.fill_(-0.5)
    mf.eval()
    out = mf(_batch())
    u = mf.user_embedding.weight[[0, 1, 2]]
    v = mf.item_embedding.weight[[3, 4, 3]]
    expected = 3.5 + 0.25 - 0.5 + (u * v).sum(-1)
    assert torch.allclose(out.predictions, expected)
    assert out.predictions.shape == (3,)


def test_l2_adds_batch_mean_squared_norms():
    mf = BiasedMF.build(5, 6, 3, global_mean=3.0, l2=0.1)
    batch = _batch()
    out = mf(batch)
    mse = (out.predictions - batch["rating"]).pow(2).mean()
    h = out.hidden
    norms = (
        h["user_vectors"].pow(2).sum(-1) + h["item_vectors"].pow(2).sum(-1) + h["user_bias"] ** 2 + h["item_bias"] ** 2
    )
    assert torch.allclose(mf.loss(batch, out), mse + 0.1 * norms.mean())


def test_sse_transform_swaps_vector_and_bias_together():
    torch.manual_seed(0)
    transform = SSE(6, p=1.0, seed=3)
    mf = BiasedMF.build(5, 6, 3, global_mean=0.0, item_transform=transform)
    with torch.no_grad():
        mf.item_bias.weight.copy_(torch.arange(6.0).unsqueeze(1))
        mf.item_embedding.weight.zero_()
    out = mf(_batch())
    # with zero vectors and user biases, the prediction is exactly the bias of the swapped item
    swapped = out.predictions - mf.user_bias(torch.tensor([0, 1, 2])).squeeze(-1)
    assert torch.all(swapped != torch.tensor([3.0, 4.0, 3.0]))
    assert torch.equal(out.hidden["item_bias"], swapped)


def test_eval_mode_is_deterministic_with_sse_and_dropout():
    mf = BiasedMF.build(5, 6, 3, global_mean=3.0, item_transform=SSE(6, p=0.5, seed=0), dropout=0.5)
    mf.eval()
    assert torch.equal(mf(_batch()).predictions, mf(_batch()).predictions)


def test_accepts_prebuilt_wrapped_embeddings():
    item = SSEEmbedding(nn.Embedding(6, 3), SSE(6, p=0.1, seed=0))
    mf = BiasedMF(nn.Embedding(5, 3), item, nn.Embedding(5, 1), nn.Embedding(6, 1), global_mean=3.0)
    loss = mf.loss(_batch(), mf(_batch()))
    loss.backward()
    assert item.weight.grad is not None


def test_every_parameter_gets_a_gradient():
    mf = BiasedMF.build(5, 6, 3, global_mean=3.0, l2=0.01, dropout=0.2)
    mf.loss(_batch(), mf(_batch())).backward()
    for name, p in mf.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("kwargs", [{"dropout": 1.0}, {"dropout": -0.1}, {"l2": -1.0}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        BiasedMF.build(5, 6, 3, **kwargs)

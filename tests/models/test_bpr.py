import torch
import torch.nn.functional as F

from embreg.models import BPR
from embreg.sse import SSE


def _batch():
    return {"user": torch.tensor([0, 1]), "pos": torch.tensor([2, 3]), "neg": torch.tensor([4, 5])}


def test_prediction_is_score_difference_and_loss_is_bpr():
    bpr = BPR.build(3, 6, 4)
    bpr.eval()
    out = bpr(_batch())
    scores = bpr.score_all(torch.tensor([0, 1]))
    expected = scores[[0, 1], [2, 3]] - scores[[0, 1], [4, 5]]
    assert torch.allclose(out.predictions, expected, atol=1e-6)
    assert torch.allclose(bpr.loss(_batch(), out), -F.logsigmoid(expected).mean(), atol=1e-6)


def test_score_all_shape_and_bias():
    bpr = BPR.build(3, 6, 4)
    with torch.no_grad():
        bpr.item_bias.weight.copy_(torch.arange(6.0).unsqueeze(1))
        bpr.user_embedding.weight.zero_()
    scores = bpr.score_all(torch.tensor([0, 2]))
    assert scores.shape == (2, 6)
    assert torch.equal(scores[0], torch.arange(6.0))


def test_no_bias_variant_and_gradients():
    bpr = BPR.build(3, 6, 4, item_bias=False, l2=0.01, item_transform=SSE(6, p=0.2, seed=1))
    bpr.loss(_batch(), bpr(_batch())).backward()
    assert bpr.item_bias is None
    assert bpr.user_embedding.weight.grad.abs().sum() > 0
    assert bpr.item_embedding.weight.grad.abs().sum() > 0


def test_l2_term():
    bpr = BPR.build(3, 6, 4, l2=0.5)
    out = bpr(_batch())
    plain = -F.logsigmoid(out.predictions).mean()
    assert bpr.loss(_batch(), out) > plain

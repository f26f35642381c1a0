"""Locked dropout, embedding dropout, weight drop, tied output and the dropout switch."""

import pytest
import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.nn import (
    EmbeddingDropout,
    LockedDropout,
    TiedOutput,
    WeightDrop,
    drop_connect,
    dropout_active,
    dropout_disabled,
    embedding_dropout,
    locked_dropout,
)


def test_locked_dropout_uses_one_mask_across_time():
    torch.manual_seed(0)
    y = locked_dropout(torch.ones(64, 20, 8), 0.5)
    assert torch.equal(y, y[:, :1].expand_as(y))  # every time step repeats the first one's mask
    assert set(y.unique().tolist()) == {0.0, 2.0}
    assert not torch.equal(y[0], y[1])  # sequences get different masks


def test_locked_dropout_rate_and_mean_within_tolerance():
    torch.manual_seed(1)
    y = locked_dropout(torch.ones(4000, 3, 50), 0.3)
    assert (y[:, 0] == 0).float().mean().item() == pytest.approx(0.3, abs=0.01)
    assert y.mean().item() == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize(
    "make",
    [
        lambda: LockedDropout(0.5),
        lambda: EmbeddingDropout(nn.Embedding(9, 4), 0.5),
        lambda: WeightDrop(nn.LSTM(4, 3, batch_first=True), ["weight_hh_l0"], 0.5),
    ],
)
def test_blocks_are_identity_in_eval_at_zero_and_when_disabled(make):
    torch.manual_seed(0)
    block = make()
    x = torch.randint(0, 9, (2, 5)) if isinstance(block, EmbeddingDropout) else torch.randn(2, 5, 4)

    def plain():
        if isinstance(block, EmbeddingDropout):
            return block.embedding(x)
        if isinstance(block, WeightDrop):
            return block.module(x)[0]
        return x

    def run():
        out = block(x)
        return out[0] if isinstance(out, tuple) else out

    assert not torch.equal(run(), plain())
    with dropout_disabled(block):
        assert torch.equal(run(), plain())
        assert not dropout_active(block)
    assert block.enabled and dropout_active(block)
    block.eval()
    assert torch.equal(run(), plain())
    block.train()
    block.q = 0.0
    assert torch.equal(run(), plain())


def test_embedding_dropout_drops_whole_words():
    torch.manual_seed(0)
    weight = torch.randn(50, 6)
    ids = torch.randint(0, 50, (8, 30))
    out = embedding_dropout(weight, ids, 0.5)
    dropped = (out == 0).all(-1)
    for word in ids.unique():
        at = ids == word
        assert dropped[at].all() or (~dropped[at]).all()  # one decision per word type
    kept = ~dropped
    assert torch.allclose(out[kept], 2 * weight[ids][kept])


def test_weight_drop_keeps_raw_parameters_and_passes_gradients():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 3, batch_first=True)
    raw = lstm.weight_hh_l0.detach().clone()
    block = WeightDrop(lstm, ["weight_hh_l0"], 0.5)
    out1, _ = block(torch.randn(2, 5, 4))
    out1.sum().backward()
    assert torch.equal(lstm.weight_hh_l0.detach(), raw)
    assert lstm.weight_hh_l0.grad is not None and lstm.weight_hh_l0.grad.abs().sum() > 0
    assert isinstance(lstm.weight_hh_l0, nn.Parameter) and "weight_hh_l0" in dict(lstm.named_parameters())
    x = torch.randn(2, 5, 4)
    assert not torch.equal(block(x)[0], block(x)[0])  # a fresh mask per call


def test_drop_connect_rate():
    torch.manual_seed(0)
    w = drop_connect(torch.ones(200, 200), 0.4)
    assert (w == 0).float().mean().item() == pytest.approx(0.4, abs=0.01)


def test_tied_output_shares_the_embedding_parameter():
    emb = nn.Embedding(10, 4)
    head = TiedOutput(emb)
    ids = torch.tensor([[1, 2]])
    head(emb(ids)).sum().backward()
    params = list(nn.ModuleDict({"emb": emb, "head": head}).parameters())
    assert head.weight is emb.weight and len(params) == 2  # the weight once, plus the output bias
    assert emb.weight.grad[0].abs().sum() > 0  # row 0 only gets gradient through the output layer


@pytest.mark.parametrize("q", [-0.1, 1.0, 1.5, "0.5"])
def test_bad_probabilities_raise(q):
    with pytest.raises(EmbregError, match=r"\[0, 1\)"):
        LockedDropout(q)
    with pytest.raises(EmbregError, match=r"\[0, 1\)"):
        drop_connect(torch.ones(2), q)


def test_weight_drop_names_unknown_weights():
    with pytest.raises(EmbregError, match="weight_hh_l0"):
        WeightDrop(nn.LSTM(2, 2), ["weight_hh"], 0.5)

"""The BiLSTM-CRF tagger: shapes, gradients to every parameter, padding, token transforms, valid decodes."""

from __future__ import annotations

import torch

from embreg.models.bilstm_crf import BiLSTMCRF
from embreg.nn.crf import invalid_transition
from embreg.sse import SSE

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _batch() -> dict[str, torch.Tensor]:
    tokens = torch.tensor([[2, 3, 4, 5, 0, 0], [6, 7, 0, 0, 0, 0]])
    return {"tokens": tokens, "tags": torch.tensor([[1, 2, 0, 3, 0, 0], [0, 1, 0, 0, 0, 0]]), "mask": tokens != 0}


def test_forward_loss_and_gradients_reach_every_parameter() -> None:
    torch.manual_seed(0)
    model = BiLSTMCRF(10, TAGS, emb_dim=6, hidden_dim=5, layers=2, dropout=0.0)
    batch = _batch()
    out = model(batch)
    assert out.predictions.shape == (2, 4, len(TAGS))  # cut to the longest sentence
    model.loss(batch, out).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert model.embedding.weight.grad[0].abs().sum() == 0  # padding gets no gradient
    assert model.crf.transitions.grad.abs().sum() > 0


def test_padding_does_not_change_a_sentence() -> None:
    torch.manual_seed(1)
    model = BiLSTMCRF(10, TAGS, emb_dim=6, hidden_dim=5, dropout=0.0).eval()
    alone = {"tokens": torch.tensor([[6, 7]]), "tags": torch.tensor([[0, 1]]), "mask": torch.tensor([[True, True]])}
    batch = _batch()
    with torch.no_grad():
        torch.testing.assert_close(model(batch).predictions[1, :2], model(alone).predictions[0])
        assert model.decode(batch)[1, :2].tolist() == model.decode(alone)[0].tolist()


def test_decodes_are_valid_bio_and_eval_is_deterministic() -> None:
    torch.manual_seed(2)
    model = BiLSTMCRF(10, TAGS, emb_dim=6, hidden_dim=5, dropout=0.5)
    with torch.no_grad():
        model.emissions.bias.copy_(torch.tensor([0.0, 0.0, 9.0, 0.0, 9.0]))  # pushes towards I- everywhere
    model.eval()
    batch = _batch()
    decoded = model.decode(batch)
    assert torch.equal(decoded, model.decode(batch))
    for row, n in zip(decoded.tolist(), batch["mask"].sum(dim=1).tolist(), strict=True):
        assert invalid_transition([TAGS[i] for i in row[:n]], "bio") is None
        assert row[n:] == [-1] * (len(row) - n)


def test_the_token_transform_swaps_tokens_in_training_only_and_never_padding() -> None:
    sse = SSE(10, p=1.0, seed=0)
    model = BiLSTMCRF(10, TAGS, emb_dim=6, hidden_dim=5, token_transform=sse)
    batch = _batch()
    drawn = model.draw_index_transforms(batch)
    assert (drawn["tokens"][batch["mask"][:, :4]] != batch["tokens"][:, :4][batch["mask"][:, :4]]).all()
    assert (drawn["tokens"][~batch["mask"][:, :4]] == 0).all()
    assert model.index_transforms() == [sse]
    model.eval()
    assert torch.equal(model.swap_tokens(batch["tokens"], batch["mask"]), batch["tokens"])

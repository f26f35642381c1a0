"""The masked-LM model: decoder tied to the word embeddings, loss on the selected positions only, transforms."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")
from transformers import BertConfig, BertModel  # noqa: E402

from embreg.errors import ConfigError  # noqa: E402
from embreg.models.encoder_mlm import MaskedLanguageModel  # noqa: E402
from embreg.sse import SSE, LabelSSE  # noqa: E402

V, MASK, SPECIALS = 40, 4, (0, 1, 2, 3, 4)  # [PAD] [UNK] [CLS] [SEP] [MASK]


def _model(**kwargs) -> MaskedLanguageModel:
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=V, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16)
    return MaskedLanguageModel(BertModel(cfg), **kwargs)


def _batch() -> dict[str, torch.Tensor]:
    ids = torch.tensor([[2, 10, MASK, 12, 3, 0], [2, 20, 21, MASK, 23, 3]])
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 3], labels[1, 1] = 11, 22, 20
    return {"input_ids": ids, "attention_mask": (torch.arange(6) < torch.tensor([[5], [6]])).long(), "labels": labels}


def test_the_decoder_is_the_word_embedding_matrix() -> None:
    model = _model()
    assert model.head.decoder_weight is model.encoder.embeddings.word_embeddings.weight
    assert not any("decoder" in k or k.startswith("head.word") for k in model.state_dict())
    out = model(_batch())
    model.loss(_batch(), out).backward()
    assert model.encoder.embeddings.word_embeddings.weight.grad is not None
    assert model.head.bias.grad is not None and model.head.dense.weight.grad is not None


def test_logits_and_loss_cover_the_selected_positions_only() -> None:
    model = _model().eval()
    batch = _batch()
    out = model(batch)
    assert out.predictions.shape == (3, V)
    expected = F.cross_entropy(out.predictions, torch.tensor([11, 20, 22]))
    assert torch.equal(model.loss(batch, out), expected)


def test_token_and_label_transforms_leave_specials_and_structure_alone() -> None:
    model = _model(
        token_transform=SSE(V, p=1.0, seed=0, exclude=SPECIALS),
        label_transform=LabelSSE(V, p=1.0, seed=1, exclude=SPECIALS),
    ).train()
    batch = _batch()
    drawn = model.draw_index_transforms(batch)
    ids = batch["input_ids"]
    special = torch.isin(ids, torch.tensor(SPECIALS))
    assert torch.equal(drawn["input_ids"][special], ids[special])  # [MASK], [CLS], [SEP], [PAD] stay
    assert (drawn["input_ids"][~special] != ids[~special]).all()
    selected = batch["labels"] != -100
    assert torch.equal(drawn["labels"][~selected], batch["labels"][~selected])
    assert (drawn["labels"][selected] != batch["labels"][selected]).all()
    assert not torch.isin(drawn["labels"][selected], torch.tensor(SPECIALS)).any()
    model.eval()
    assert torch.equal(model.step_targets(batch), torch.tensor([11, 20, 22]))


def test_a_non_bert_encoder_is_refused() -> None:
    with pytest.raises(ConfigError, match="Linear is not a BERT-family encoder"):
        MaskedLanguageModel(torch.nn.Linear(2, 2))


def test_padding_changes_neither_the_logits_nor_the_loss_of_a_text() -> None:
    """A text's logits do not depend on how much padding its batch carries (dynamic padding, length grouping)."""
    model = _model().eval()
    batch = _batch()
    short = {k: v[:1, :5] for k, v in batch.items()}  # the first text alone, cut to its own 5 tokens
    wide = {k: torch.cat([v, torch.zeros(2, 7, dtype=v.dtype)], dim=1) for k, v in batch.items()}
    wide["labels"][:, 6:] = -100  # 7 padding columns more
    with torch.no_grad():
        alone, together, padded = model(short), model(batch), model(wide)
    assert torch.equal(together.predictions, padded.predictions)  # all-padding columns are cut
    assert torch.allclose(alone.predictions, together.predictions[:1], atol=1e-5)  # beside a longer text
    assert torch.allclose(model.loss(short, alone), F.cross_entropy(together.predictions[:1], torch.tensor([11])))

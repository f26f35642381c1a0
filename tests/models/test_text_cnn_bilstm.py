"""The word-piece text models (Kim CNN, BiLSTM + self-attention): shapes, padding, gradients, modes, bad input."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.models.bilstm_attention import ATTENTION_KEY, BiLSTMAttention
from embreg.models.text_cnn import TextCNN, max_over_windows
from embreg.models.word_piece_swaps import swap_word_pieces
from embreg.recipes import load_recipe
from embreg.regularizers.attention_penalty import ATTENTION_KEY as PENALTY_KEY
from embreg.sse import SSE
from tests.helpers.threads import one_thread  # noqa: F401 (autouse)

VOCAB = 30


def _cnn(dropout: float = 0.0, **kwargs) -> TextCNN:
    torch.manual_seed(0)
    return TextCNN(nn.Embedding(VOCAB, 8), 3, num_filters=4, dropout=dropout, **kwargs)


def _bilstm(dropout: float = 0.0, **kwargs) -> BiLSTMAttention:
    torch.manual_seed(0)
    return BiLSTMAttention(
        nn.Embedding(VOCAB, 8), 3, hidden_dim=5, attn_dim=4, hops=2, mlp_dim=6, dropout=dropout, **kwargs
    )


MODELS = {"text-cnn": _cnn, "bilstm-attn": _bilstm}


def _batch() -> dict[str, torch.Tensor]:
    lengths = torch.tensor([9, 6, 3, 2])  # 3 and 2 tokens: shorter than the widest filter (5)
    mask = (torch.arange(9).unsqueeze(0) < lengths.unsqueeze(1)).long()
    ids = torch.randint(1, VOCAB, (4, 9), generator=torch.Generator().manual_seed(0)) * mask
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0, 1, 2, 1])}


@pytest.mark.parametrize("name", MODELS)
def test_shapes_and_loss(name: str) -> None:
    model = MODELS[name]()
    batch = _batch()
    out = model(batch)
    assert out.predictions.shape == (4, 3)
    torch.testing.assert_close(model.loss(batch, out), nn.functional.cross_entropy(out.predictions, batch["labels"]))


@pytest.mark.parametrize("name", MODELS)
def test_each_example_scores_as_alone_whatever_the_padding(name: str) -> None:
    """Padding (and the batch an example is in) never reaches an example's output."""
    model = MODELS[name]().eval()
    batch = _batch()
    together = model(batch).predictions
    for b, length in enumerate(batch["attention_mask"].sum(dim=1).tolist()):
        alone = {k: v[b : b + 1, :length] if v.dim() == 2 else v[b : b + 1] for k, v in batch.items()}
        torch.testing.assert_close(model(alone).predictions[0], together[b])
    padded = {k: torch.cat([v, torch.full((4, 3), 7)], dim=1) if k == "input_ids" else v for k, v in batch.items()}
    padded["attention_mask"] = torch.cat([batch["attention_mask"], torch.zeros(4, 3, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(padded).predictions, together)


def test_bilstm_attention_gives_padding_no_weight() -> None:
    model = _bilstm().eval()
    batch = _batch()
    weights = model(batch).hidden[ATTENTION_KEY]
    assert ATTENTION_KEY == PENALTY_KEY
    assert weights.shape == (4, 2, 9)
    assert weights.masked_select((batch["attention_mask"] == 0).unsqueeze(1)).abs().sum() == 0
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(4, 2))


def test_one_max_pooling_reads_only_windows_inside_the_text() -> None:
    maps = torch.tensor([[[1.0, 2.0, 9.0, 9.0]], [[3.0, 1.0, 9.0, 9.0]]])
    assert max_over_windows(maps, torch.tensor([5, 1]), 3).tolist() == [[9.0], [3.0]]
    assert max_over_windows(maps, torch.tensor([4, 4]), 3).tolist() == [[2.0], [3.0]]


@pytest.mark.parametrize("name", MODELS)
def test_gradients_reach_every_parameter(name: str) -> None:
    model = MODELS[name]()
    batch = _batch()
    model.loss(batch, model(batch)).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []


@pytest.mark.parametrize("name", MODELS)
def test_dropout_acts_in_training_only(name: str) -> None:
    model = MODELS[name](dropout=0.5)
    batch = _batch()
    torch.manual_seed(1)
    first = model(batch).predictions
    second = model(batch).predictions
    assert not torch.equal(first, second)
    model.eval()
    torch.testing.assert_close(model(batch).predictions, model(batch).predictions)


@pytest.mark.parametrize("name", MODELS)
def test_token_transform_swaps_word_pieces_in_training_only(name: str) -> None:
    transform = SSE(VOCAB, p=1.0, seed=0)
    model = MODELS[name](token_transform=transform)
    batch = _batch()
    drawn = model.draw_index_transforms(batch)["input_ids"]
    mask = batch["attention_mask"]
    last = mask.sum(dim=1) - 1
    rows = torch.arange(4)
    assert torch.equal(drawn[:, 0], batch["input_ids"][:, 0]) and torch.equal(
        drawn[rows, last], batch["input_ids"][rows, last]
    )
    assert torch.equal(drawn[mask == 0], batch["input_ids"][mask == 0])
    assert not torch.equal(drawn, batch["input_ids"])
    model.eval()
    assert torch.equal(swap_word_pieces(transform, batch["input_ids"], mask, model.training), batch["input_ids"])
    assert model.index_transforms() == [transform]


def test_bad_settings_are_refused_with_their_value() -> None:
    with pytest.raises(ConfigError, match=r"filter_sizes=\[3, 0\] must be one or more ints >= 1"):
        TextCNN(nn.Embedding(5, 4), 2, filter_sizes=[3, 0])
    with pytest.raises(ConfigError, match="num_filters=0 must be an int >= 1"):
        TextCNN(nn.Embedding(5, 4), 2, num_filters=0)
    with pytest.raises(ConfigError, match=r"dropout=1.0 is outside \[0, 1\)"):
        BiLSTMAttention(nn.Embedding(5, 4), 2, dropout=1.0)
    with pytest.raises(ConfigError, match="hidden_dim=0 must be an int >= 1"):
        BiLSTMAttention(nn.Embedding(5, 4), 2, hidden_dim=0)
    with pytest.raises(ConfigError, match="model.embedding_dim=64 is the width of a random table only"):
        load_recipe("cls-cnn-reviews", ["model.embedding_dim=64"])
    with pytest.raises(ConfigError, match="model.hops=0 must be an int >= 1"):
        load_recipe("cls-bilstm-attn-reviews", ["model.hops=0"])
    with pytest.raises(ConfigError, match="init_embeddings"):
        load_recipe("cls-cnn-reviews", ["model.init_embeddings=glove"])
    assert load_recipe("cls-cnn-reviews", ["model.init_embeddings=random", "model.embedding_dim=64"])

"""EncoderClassifier: shapes, losses, head initialisation, padding invariance, bad input."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertModel

from embreg.errors import ConfigError
from embreg.models import EncoderClassifier
from embreg.models.encoder_classifier import trim_padding
from tests.helpers.finetune_tiny import one_thread, tiny_batch, tiny_classifier  # noqa: F401 (one_thread: autouse)


def test_outputs_hidden_states_and_losses() -> None:
    model = tiny_classifier(num_labels=3).eval()
    batch = tiny_batch(num_labels=3)
    out = model(batch)
    assert out.predictions.shape == (4, 3)
    assert sorted(out.hidden) == [f"hidden_states.{i}" for i in range(4)]
    assert out.hidden["hidden_states.0"].shape == (4, 7, 16)
    loss = model.loss(batch, out)
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(out.predictions, batch["labels"]))
    regression = tiny_classifier(num_labels=1)
    batch = tiny_batch(num_labels=1)
    out = regression(batch)
    assert out.predictions.shape == (4,)
    torch.testing.assert_close(regression.loss(batch, out), ((out.predictions - batch["labels"]) ** 2).mean())


def test_head_is_normal_with_std_002_and_zero_bias() -> None:
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=20, hidden_size=512, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)
    model = EncoderClassifier(BertModel(cfg), num_labels=40)
    assert 0.019 < model.head.weight.std().item() < 0.021
    assert abs(model.head.weight.mean().item()) < 0.001 and torch.equal(model.head.bias, torch.zeros(40))


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_extra_padding_does_not_change_predictions(pooling: str) -> None:
    torch.manual_seed(0)
    model = EncoderClassifier(tiny_classifier().encoder, 2, pooling=pooling).eval()
    batch = tiny_batch()
    padded = {
        k: torch.cat([v, torch.zeros(v.shape[0], 5, dtype=v.dtype)], dim=1) if v.dim() == 2 else v
        for k, v in batch.items()
    }
    assert trim_padding(padded)["input_ids"].shape == batch["input_ids"].shape
    torch.testing.assert_close(model(padded).predictions, model(batch).predictions)


def test_mean_pooling_ignores_padding_positions() -> None:
    model = tiny_classifier()
    states = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    assert model.pool(states, torch.tensor([[1, 1, 0]])).tolist() == [[2.0, 3.0]]


def test_bad_input_is_named() -> None:
    encoder = tiny_classifier().encoder
    with pytest.raises(ConfigError, match="num_labels=0 must be an int >= 1"):
        EncoderClassifier(encoder, 0)
    with pytest.raises(ConfigError, match="pooling='max' must be 'mean' or 'cls'"):
        EncoderClassifier(encoder, 2, pooling="max")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"dropout=1.0 is outside \[0, 1\)"):
        EncoderClassifier(encoder, 2, dropout=1.0)
    with pytest.raises(ConfigError, match="Linear is not a BERT-family encoder"):
        EncoderClassifier(torch.nn.Linear(2, 2), 2)

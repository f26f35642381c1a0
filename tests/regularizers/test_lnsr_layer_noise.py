"""The FT+Noise ablation (lnsr-noise-stability-bert.txt, Table 2): noise at the input of layer b, training only."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.regularizers import LayerNoise
from tests.helpers.finetune_tiny import tiny_batch, tiny_classifier


def test_noise_reaches_layer_b_in_training_and_not_in_eval() -> None:
    model = tiny_classifier(dropout=0.0)
    batch = tiny_batch()
    model.eval()
    clean = model(batch).hidden["hidden_states.1"].detach()
    model = LayerNoise(sigma=0.5, start_layer=2).prepare(model)
    seen = []  # hooked after LayerNoise's own hook, so it sees the input layer 2 really gets
    model.encoder.encoder.layer[1].register_forward_pre_hook(lambda m, args: seen.append(args[0].detach().clone()))
    model.eval()
    model(batch)
    assert torch.equal(seen[-1], clean)
    model.train()
    model(batch)
    noise = seen[-1] - clean
    assert 0.4 < noise.std().item() < 0.6
    assert torch.equal(model.eval()(batch).predictions, model.eval()(batch).predictions)


def test_zero_sigma_changes_nothing_and_bad_input_is_named() -> None:
    model = tiny_classifier(dropout=0.0)
    batch = tiny_batch()
    before = model.train()(batch).predictions.detach()
    LayerNoise(sigma=0.0).prepare(model)
    assert torch.equal(model(batch).predictions.detach(), before)
    with pytest.raises(ConfigError, match=r"sigma=-1 is outside \[0, inf\)"):
        LayerNoise(sigma=-1)
    with pytest.raises(ConfigError, match=r"start_layer=9 is outside the model's layer range \[1, 3\]"):
        LayerNoise(start_layer=9).prepare(model)
    with pytest.raises(ConfigError, match="has no layer stack"):
        LayerNoise().prepare(nn.Sequential(nn.Linear(2, 2)))


def test_remove_takes_the_hook_off() -> None:
    model = tiny_classifier(dropout=0.0).train()
    batch = tiny_batch()
    before = model(batch).predictions.detach()
    noise = LayerNoise(sigma=1.0)
    noise.prepare(model)
    assert not torch.equal(model(batch).predictions.detach(), before)
    noise.remove()
    assert torch.equal(model(batch).predictions.detach(), before)

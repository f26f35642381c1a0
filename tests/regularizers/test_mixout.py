"""Mixout (Lee et al., 2020): p = 0 is the plain layer, eval uses the expected mixture, any linear layer."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import ConfigError
from embreg.regularizers import Mixout, MixoutLinear
from embreg.regularizers.mixout import mixout_weight
from tests.helpers.finetune_tiny import tiny_batch, tiny_classifier


def _moved_linear(seed: int = 0) -> nn.Linear:
    torch.manual_seed(seed)
    layer = nn.Linear(6, 4)
    return layer


def test_p_zero_is_the_fine_tuned_model_in_training_mode() -> None:
    model = tiny_classifier(dropout=0.0).train()
    batch = tiny_batch()
    before = model(batch).predictions.detach()
    model = Mixout(p=0.0).prepare(model)
    assert torch.equal(model(batch).predictions.detach(), before)


def test_eval_mode_uses_the_expected_mixture_which_is_the_weight() -> None:
    layer = MixoutLinear.from_linear(_moved_linear(), p=0.7)
    with torch.no_grad():
        layer.weight.add_(1.0)  # fine-tuned away from the target
    x = torch.randn(5, 6)
    torch.testing.assert_close(layer.eval()(x), F.linear(x, layer.weight, layer.bias))
    draws = torch.stack([mixout_weight(layer.weight.detach(), layer.target, 0.7) for _ in range(4000)])
    torch.testing.assert_close(draws.mean(0), layer.weight.detach(), atol=0.08, rtol=0)  # E[W_mix] = W


def test_training_mixes_in_the_target_and_gradients_skip_swapped_entries() -> None:
    layer = MixoutLinear.from_linear(_moved_linear(), p=0.5)
    with torch.no_grad():
        layer.weight.copy_(layer.target + 1.0)
    torch.manual_seed(3)
    mixed = mixout_weight(layer.weight, layer.target, 0.5)
    torch.manual_seed(3)
    mask = torch.empty_like(layer.weight).bernoulli_(0.5).bool()
    # swapped: (u - p u) / (1 - p) = u;  kept: (W - p u) / (1 - p) = u + 2 for W = u + 1, p = 0.5
    torch.testing.assert_close(mixed.detach(), torch.where(mask, layer.target, layer.target + 2.0))
    torch.manual_seed(3)
    layer.train()(torch.ones(1, 6)).sum().backward()
    assert torch.equal(layer.weight.grad == 0, mask)


def test_prepare_keeps_parameters_and_names_and_adds_targets() -> None:
    model = tiny_classifier()
    params = dict(model.named_parameters())
    reg = Mixout(p=0.2, include="encoder.")
    model = reg.prepare(model)
    assert reg.replaced and all(name.startswith("encoder.") for name in reg.replaced)
    assert isinstance(model.encoder.encoder.layer[0].attention.self.query, MixoutLinear)
    assert type(model.head) is nn.Linear
    assert all(params[name] is p for name, p in model.named_parameters())
    assert {k for k in model.state_dict() if k.endswith(".target")}


def test_bad_input_is_named() -> None:
    for p in (-0.1, 1.0):
        with pytest.raises(ConfigError, match=rf"p={p} is outside \[0, 1\)"):
            Mixout(p=p)
    with pytest.raises(ConfigError, match="has no nn.Linear layer matching"):
        Mixout(p=0.1).prepare(nn.Sequential(nn.ReLU()))

"""L2-SP (lnsr-noise-stability-bert.txt, Sec. 4.2): zero at the pretrained weights, exact values and gradients."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.regularizers import L2SP, StepContext
from tests.helpers.finetune_tiny import tiny_classifier, tiny_hf_classifier


def test_zero_at_the_pretrained_weights_and_exact_after_a_shift() -> None:
    model = tiny_classifier()
    reg = L2SP(alpha=0.4, beta=0.0)
    model = reg.prepare(model)
    assert reg.penalty(StepContext(model, {})).item() == 0.0
    assert all(name.startswith("encoder.") for name in reg.shared_names)
    weight = model.encoder.encoder.layer[0].output.dense.weight
    with torch.no_grad():
        weight.add_(0.5)
    expected = 0.5 * 0.4 * weight.numel() * 0.25
    torch.testing.assert_close(reg.penalty(StepContext(model, {})), torch.tensor(expected))


def test_beta_penalises_only_the_new_head_and_gradients_match() -> None:
    model = tiny_classifier()
    reg = L2SP(alpha=2.0, beta=3.0)
    model = reg.prepare(model)
    head_norm = model.head.weight.pow(2).sum() + model.head.bias.pow(2).sum()
    torch.testing.assert_close(reg.penalty(StepContext(model, {})), 1.5 * head_norm.detach())
    weight = model.encoder.embeddings.word_embeddings.weight
    start = weight.detach().clone()
    with torch.no_grad():
        weight.mul_(1.1)
    model.zero_grad()
    reg.penalty(StepContext(model, {})).backward()
    torch.testing.assert_close(weight.grad, 2.0 * (weight.detach() - start))
    torch.testing.assert_close(model.head.weight.grad, 3.0 * model.head.weight.detach())


def test_hugging_face_models_use_their_base_model_prefix() -> None:
    model = tiny_hf_classifier()
    reg = L2SP(alpha=1.0)
    reg.prepare(model)
    assert reg.shared_names and all(name.startswith("bert.") for name in reg.shared_names)


def test_bad_input_is_named() -> None:
    with pytest.raises(ConfigError, match=r"alpha=-1 is outside \[0, inf\)"):
        L2SP(alpha=-1)
    with pytest.raises(ConfigError, match="cannot tell which parameters of Sequential are pretrained"):
        L2SP().prepare(nn.Sequential(nn.Linear(2, 2)))
    with pytest.raises(ConfigError, match="no parameter of Sequential matches shared='body.'"):
        L2SP(shared="body.").prepare(nn.Sequential(nn.Linear(2, 2)))
    with pytest.raises(ConfigError, match="needs prepare"):
        L2SP().penalty(StepContext(nn.Linear(2, 2), {}))

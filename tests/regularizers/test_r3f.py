"""R3F (Aghajanyan et al., 2020) and the symmetric KL it uses."""

from __future__ import annotations

import pytest
import torch

from embreg.errors import ConfigError
from embreg.regularizers import R3F, StepContext
from embreg.regularizers.divergence import prediction_divergence, symmetric_kl
from tests.helpers.finetune_tiny import tiny_batch, tiny_classifier


def test_symmetric_kl_matches_its_definition() -> None:
    a, b = torch.randn(5, 3), torch.randn(5, 3)
    p, q = a.softmax(-1), b.softmax(-1)
    expected = ((p * (p / q).log()).sum(-1) + (q * (q / p).log()).sum(-1)).mean()
    torch.testing.assert_close(symmetric_kl(a, b), expected)
    assert symmetric_kl(a, a).item() == 0.0
    assert prediction_divergence(torch.ones(3), torch.zeros(3)).item() == 1.0  # 1-D: squared error
    with pytest.raises(ConfigError, match="kind='l1' must be"):
        prediction_divergence(a, b, "l1")  # type: ignore[arg-type]


def test_penalty_is_zero_without_noise_and_positive_with_it() -> None:
    model = tiny_classifier(dropout=0.0).train()
    batch = tiny_batch()
    zero = R3F(weight=1.0, sigma=0.0).prepare(model)
    assert R3F(weight=1.0, sigma=0.0).penalty(StepContext(zero, batch, output=model(batch))).item() == 0.0
    reg = R3F(weight=2.0, sigma=0.5)
    value = reg.penalty(StepContext(model, batch, output=model(batch)))
    assert value.item() > 0
    value.backward()
    assert model.encoder.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_uniform_noise_is_bounded_and_normal_noise_has_its_scale() -> None:
    x = torch.zeros(20000)
    assert R3F(sigma=0.2, noise="uniform").sample_noise(x).abs().max().item() <= 0.2
    assert 0.19 < R3F(sigma=0.2).sample_noise(x).std().item() < 0.21


def test_replay_removes_the_dropout_difference() -> None:
    model = tiny_classifier(dropout=0.3).train()
    batch = tiny_batch()
    reg = R3F(weight=1.0, sigma=0.0, replay_dropout=True)
    model = reg.prepare(model)
    assert reg.penalty(StepContext(model, batch, output=model(batch))).item() == 0.0
    fresh = R3F(weight=1.0, sigma=1e-9)
    assert fresh.penalty(StepContext(model, batch, output=model(batch))).item() > 0


def test_bad_input_is_named() -> None:
    with pytest.raises(ConfigError, match=r"sigma=-0.5 is outside \[0, inf\)"):
        R3F(sigma=-0.5)
    with pytest.raises(ConfigError, match="noise='laplace' must be 'normal' or 'uniform'"):
        R3F(noise="laplace")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="has no layer stack"):
        R3F().prepare(torch.nn.Linear(2, 2))

"""SMART (Jiang et al., 2020): the perturbation stays in its epsilon-ball; penalty, regression and Bregman term."""

from __future__ import annotations

import pytest
import torch

from embreg.errors import ConfigError
from embreg.regularizers import SMART, StepContext
from embreg.regularizers.smart import project_to_ball
from tests.helpers.finetune_tiny import tiny_batch, tiny_classifier


@pytest.mark.parametrize("norm", ["inf", "l2"])
def test_perturbation_stays_inside_the_epsilon_ball(norm: str) -> None:
    model = tiny_classifier(dropout=0.1).train()
    reg = SMART(weight=1.0, epsilon=0.05, step_size=1.0, init_std=1.0, steps=3, norm=norm)
    model = reg.prepare(model)
    batch = tiny_batch()
    value = reg.penalty(StepContext(model, batch, output=model(batch)))
    assert value.item() > 0
    delta = reg.last_delta
    size = delta.abs().amax(-1) if norm == "inf" else delta.norm(dim=-1)
    assert size.max().item() <= 0.05 * (1 + 1e-5)
    assert size.max().item() > 0.04  # the ascent pushed it to the boundary


def test_ascent_increases_the_divergence_over_random_noise() -> None:
    model = tiny_classifier(dropout=0.0).eval()
    batch = tiny_batch()
    output = model(batch)
    random = SMART(weight=1.0, epsilon=0.5, step_size=1e-9, init_std=0.5, steps=1)
    adversarial = SMART(weight=1.0, epsilon=0.5, step_size=1.0, init_std=0.5, steps=3)
    for reg in (random, adversarial):
        reg.prepare(model)
    torch.manual_seed(0)
    low = random.penalty(StepContext(model, batch, output=output)).item()
    torch.manual_seed(0)
    high = adversarial.penalty(StepContext(model, batch, output=output)).item()
    assert high > low > 0


def test_regression_uses_squared_error_and_gradients_reach_the_encoder() -> None:
    model = tiny_classifier(num_labels=1, dropout=0.0).train()
    reg = SMART(weight=10.0, epsilon=0.1, step_size=0.1)
    model = reg.prepare(model)
    batch = tiny_batch(num_labels=1)
    output = model(batch)
    assert output.predictions.shape == (4,)
    value = reg.penalty(StepContext(model, batch, output=output))
    value.backward()
    assert value.item() > 0
    assert model.encoder.encoder.layer[0].output.dense.weight.grad.abs().sum() > 0


def test_bregman_term_is_zero_at_the_start_and_grows_as_the_model_moves() -> None:
    model = tiny_classifier(dropout=0.0).train()
    reg = SMART(weight=0.0, bregman_weight=1.0, bregman_momentum=0.5)
    model = reg.prepare(model)
    batch = tiny_batch()
    assert reg.penalty(StepContext(model, batch, output=model(batch))).item() == pytest.approx(0.0, abs=1e-12)
    start = model.head.weight.detach().clone()
    with torch.no_grad():
        model.head.weight.add_(torch.randn_like(model.head.weight))
    moved = reg.penalty(StepContext(model, batch, output=model(batch))).item()
    assert moved > 1e-4
    # theta_tilde is updated after the anchor pass: 0.5 * start + 0.5 * moved weights
    torch.testing.assert_close(reg._ema["head.weight"], 0.5 * start + 0.5 * model.head.weight.detach())


def test_projection_helper_and_bad_input() -> None:
    assert project_to_ball(torch.tensor([[0.0, 0.0]]), 1.0, "l2").tolist() == [[0.0, 0.0]]
    with pytest.raises(ConfigError, match=r"epsilon=0 is outside \(0, inf\)"):
        SMART(epsilon=0)
    with pytest.raises(ConfigError, match="norm='l1' must be 'inf' or 'l2'"):
        SMART(norm="l1")
    with pytest.raises(ConfigError, match=r"bregman_momentum=1.0 is outside \[0, 1\)"):
        SMART(bregman_momentum=1.0)
    with pytest.raises(ConfigError, match="has no layer stack"):
        SMART().prepare(torch.nn.Linear(2, 2))

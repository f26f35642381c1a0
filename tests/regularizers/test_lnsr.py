"""LNSR (lnsr-noise-stability-bert.txt, eq. 2 / Alg. 1): exact values, zero cases, dropout replay, errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.regularizers import LNSR, StepContext
from embreg.regularizers.lnsr import noise_stability_terms
from tests.helpers.finetune_tiny import LinearStackModel, tiny_batch, tiny_classifier


def _linear_model() -> LinearStackModel:
    g = torch.Generator().manual_seed(1)
    return LinearStackModel([torch.randn(3, 3, generator=g), torch.randn(3, 3, generator=g)])


def _ctx(model: nn.Module, batch: dict) -> StepContext:
    return StepContext(model, batch, output=model(batch))


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_penalty_equals_hand_computed_value_on_a_linear_stack(reduction: str) -> None:
    model = _linear_model()
    w1, w2 = model.blocks[0].weight.detach(), model.blocks[1].weight.detach()
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(2))
    sigma, lambdas = 0.3, [2.0, 0.5]
    torch.manual_seed(7)
    eps = torch.randn_like(x) * sigma
    # f^{1,1}(x + eps) - f^{1,1}(x) = W1 eps;  f^{1,2}(x + eps) - f^{1,2}(x) = W2 W1 eps  (per example, rows)
    d1, d2 = eps @ w1.T, eps @ w1.T @ w2.T
    scale = 1.0 if reduction == "sum" else 1.0 / 3
    expected = scale * (lambdas[0] * d1.pow(2).sum(1).mean() + lambdas[1] * d2.pow(2).sum(1).mean())
    reg = LNSR(sigma=sigma, start_layer=1, weights=lambdas, reduction=reduction)
    model = reg.prepare(model)
    torch.manual_seed(7)
    value = reg.penalty(_ctx(model, {"x": x}))
    torch.testing.assert_close(value, expected, rtol=1e-5, atol=1e-7)


def test_start_layer_two_only_regularises_the_layers_above() -> None:
    model = _linear_model()
    w2 = model.blocks[1].weight.detach()
    x = torch.randn(4, 3)
    reg = LNSR(sigma=0.2, start_layer=2, weights=1.0, reduction="sum")
    model = reg.prepare(model)
    hidden = model.blocks[0](x).detach()
    torch.manual_seed(3)
    eps = torch.randn_like(hidden) * 0.2
    torch.manual_seed(3)
    value = reg.penalty(_ctx(model, {"x": x}))
    torch.testing.assert_close(value, (eps @ w2.T).pow(2).sum(1).mean())
    assert reg.last_terms is not None and reg.last_terms.shape == (1,)


@pytest.mark.parametrize(
    "kwargs", [{"sigma": 0.0}, {"sigma": 0.5, "weights": 0.0}, {"sigma": 0.5, "weights": [0.0, 0.0, 0.0]}]
)
def test_zero_sigma_or_zero_weights_add_exactly_zero(kwargs: dict) -> None:
    model = tiny_classifier(dropout=0.1)
    model.train()
    reg = LNSR(**kwargs)
    model = reg.prepare(model)
    value = reg.penalty(_ctx(model, tiny_batch()))
    assert value.item() == 0.0 and value.dim() == 0


def test_replayed_dropout_makes_the_penalty_measure_the_noise_alone() -> None:
    batch = tiny_batch()
    model = tiny_classifier(dropout=0.3)
    model.train()
    replayed = LNSR(sigma=1e-6)
    model = replayed.prepare(model)
    tiny = replayed.penalty(_ctx(model, batch)).item()
    fresh = LNSR(sigma=1e-6, replay_dropout=False)
    fresh_value = fresh.penalty(_ctx(model, batch)).item()
    assert tiny < 1e-9, tiny
    assert fresh_value > 1e-5 > 1e4 * tiny, fresh_value  # independent masks differ by the dropout noise itself
    assert LNSR(sigma=0.5).prepare(model) is model


def test_penalty_grows_with_sigma_and_reaches_every_layer() -> None:
    batch = tiny_batch()
    model = tiny_classifier(dropout=0.0)
    values = []
    for sigma in (0.01, 0.1, 1.0):
        reg = LNSR(sigma=sigma, start_layer=2)
        model = reg.prepare(model)
        torch.manual_seed(0)
        values.append(reg.penalty(_ctx(model, batch)).item())
    assert values[0] < values[1] < values[2]
    model.zero_grad()
    reg.penalty(_ctx(model, batch)).backward()
    layers = model.encoder.encoder.layer
    # layers from b on get gradients through both passes; the layer below b through the clean input x^b
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in layers[1].parameters() if p.dim() > 1)
    assert layers[0].attention.self.query.weight.grad.abs().sum() > 0
    assert model.head.weight.grad is None or model.head.weight.grad.abs().sum() == 0  # the head is not in eq. 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"sigma": -0.1}, r"sigma=-0.1 is outside \[0, inf\)"),
        ({"start_layer": 0}, r"start_layer=0 must be an int >= 1"),
        ({"weights": [1.0, -1.0]}, r"weights\[1\]=-1.0 is outside"),
        ({"reduction": "max"}, "reduction='max' must be 'mean' or 'sum'"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        LNSR(**kwargs)


def test_layer_outside_the_model_and_wrong_weight_count_are_errors() -> None:
    model = tiny_classifier(layers=3)
    with pytest.raises(ConfigError, match=r"start_layer=4 is outside the model's layer range \[1, 3\]"):
        LNSR(start_layer=4).prepare(model)
    with pytest.raises(ConfigError, match="weights has 2 entries; layers 1..3 need 3"):
        LNSR(weights=[1.0, 1.0]).prepare(model)


def test_a_model_without_layers_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="Linear has no layer stack"):
        LNSR().prepare(nn.Linear(3, 3))


def test_penalty_without_prepare_in_training_mode_asks_for_it() -> None:
    model = tiny_classifier(dropout=0.1).train()
    with pytest.raises(ConfigError, match="needs prepare"):
        LNSR(sigma=0.1).penalty(_ctx(model, tiny_batch()))


def test_noise_stability_terms_masks_padding() -> None:
    clean = torch.zeros(1, 3, 2)
    noisy = torch.tensor([[[1.0, 1.0], [2.0, 0.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert noise_stability_terms([noisy], [clean], mask, "sum").tolist() == [6.0]
    assert noise_stability_terms([noisy], [clean], mask, "mean").tolist() == [1.5]

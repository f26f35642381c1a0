"""Invariants of the dropout techniques on the LSTM LM: k=1, zero strength, eval mode, clean pass, bad input."""

import math

import pytest
import torch

from embreg.errors import EmbregError
from embreg.models import LSTMLanguageModel
from embreg.nn import dropout_disabled
from embreg.regularizers import StepContext
from embreg.regularizers.dropout import (
    DropoutK,
    ExplicitDropoutRegularizer,
    ImplicitDropoutNoise,
    TwoMaskDropoutNoise,
    algorithm2,
    algorithm4,
    dropout_k_noise_scale,
    dropout_variance,
    per_site,
    resolve_names,
)

Q = dict(q_input=0.4, q_hidden=0.4, q_output=0.4, q_weight=0.4, q_embedding=0.1)


def _model(dropout: bool = True) -> LSTMLanguageModel:
    torch.manual_seed(0)
    return LSTMLanguageModel.build(30, 8, 10, 2, **(Q if dropout else {}))


def _batch() -> dict:
    g = torch.Generator().manual_seed(1)
    return {"input": torch.randint(0, 30, (3, 6), generator=g), "target": torch.randint(0, 30, (3, 6), generator=g)}


def _grads(model, total):
    model.zero_grad()
    total.backward()
    return [p.grad.clone() if p.grad is not None else None for p in model.parameters()]


def test_dropout_k_with_k1_equals_standard_dropout_with_the_same_mask():
    model, batch = _model(), _batch()
    torch.manual_seed(7)
    loss_k, _ = DropoutK(1)(model, batch)
    grads_k = _grads(model, loss_k)
    torch.manual_seed(7)
    loss = model.loss(batch, model(batch))
    grads = _grads(model, loss)
    assert torch.equal(loss_k, loss)
    assert all(torch.equal(a, b) for a, b in zip(grads_k, grads) if a is not None)


def test_dropout_k_averages_k_independent_draws():
    model, batch = _model(), _batch()
    torch.manual_seed(3)
    loss_k, _ = DropoutK(3)(model, batch)
    torch.manual_seed(3)
    draws = [model.loss(batch, model(batch)) for _ in range(3)]
    assert len({round(d.item(), 6) for d in draws}) == 3
    assert torch.allclose(loss_k, sum(draws) / 3)


@pytest.mark.parametrize(
    "make",
    [
        lambda: [ExplicitDropoutRegularizer(0.0)],
        lambda: [
            ExplicitDropoutRegularizer({"input": 0.0, "hidden": 0.0, "output": 0.0, "weight_hh": 0.0, "embedding": 0.0})
        ],
        lambda: [ImplicitDropoutNoise(0.0)],
        lambda: (
            algorithm2(0.4, lambda1=0.0, lambda2=0.0).regularizers + [ExplicitDropoutRegularizer(0.0, form="identity")]
        ),
        lambda: [TwoMaskDropoutNoise(1)],
    ],
)
def test_zero_coefficients_reproduce_the_unregularised_gradients_exactly(make):
    model, batch = _model(dropout=False), _batch()
    out = model(batch)
    loss = model.loss(batch, out)
    plain = _grads(model, loss)
    out = model(batch)
    loss = model.loss(batch, out)
    ctx = StepContext(model, batch, out, loss)
    total = loss + sum(r.penalty(ctx) for r in make())
    regularised = _grads(model, total)
    assert all((a is None and b is None) or torch.equal(a, b) for a, b in zip(plain, regularised))


def test_every_technique_is_a_no_op_in_eval_mode():
    model, batch = _model(), _batch()
    model.eval()
    out = model(batch)
    loss = model.loss(batch, out)
    ctx = StepContext(model, batch, out, loss)
    for reg in (
        ExplicitDropoutRegularizer(1.0),
        ExplicitDropoutRegularizer(1.0, form="identity"),
        ImplicitDropoutNoise(1.0),
        TwoMaskDropoutNoise(4),
    ):
        assert reg.penalty(ctx).item() == 0.0 and not reg.penalty(ctx).requires_grad
    loss_k, _ = DropoutK(8)(model, batch)
    assert torch.equal(loss_k, loss)


def test_noise_changes_the_gradient_but_not_the_loss_value():
    model, batch = _model(dropout=False), _batch()
    out = model(batch)
    loss = model.loss(batch, out)
    plain = _grads(model, loss)
    out = model(batch)
    loss = model.loss(batch, out)
    noise = ImplicitDropoutNoise.from_dropout(0.4).penalty(StepContext(model, batch, out, loss))
    assert noise.item() == 0.0
    noisy = _grads(model, loss + noise)
    assert any(not torch.equal(a, b) for a, b in zip(plain, noisy) if a is not None)


def test_regularisers_use_a_clean_pass_when_the_objective_had_dropout():
    model, batch = _model(), _batch()
    out = model(batch)  # with dropout
    ctx = StepContext(model, batch, out, model.loss(batch, out))
    reg = ExplicitDropoutRegularizer(0.5, form="loss_jacobian")
    value = reg.penalty(ctx)
    with dropout_disabled(model):
        clean = model(batch)
        ref = reg.penalty(StepContext(model, batch, clean, model.loss(batch, clean)))
    assert torch.allclose(value, ref)


def test_two_mask_noise_is_the_scaled_difference_of_two_dropout_gradients():
    model, batch = _model(), _batch()
    torch.manual_seed(5)
    noise = TwoMaskDropoutNoise(4).penalty(StepContext(model, batch))
    assert noise.item() == 0.0
    got = _grads(model, noise)
    torch.manual_seed(5)
    first = model.loss(batch, model(batch))
    second = model.loss(batch, model(batch))
    want = _grads(model, math.sqrt(0.5 * (1 - 1 / 4)) * (first - second))
    assert all(torch.allclose(a, b) for a, b in zip(got, want) if a is not None)


def test_every_site_of_the_lm_gets_a_positive_term_and_parameters_get_gradients():
    model, batch = _model(dropout=False), _batch()
    out = model(batch)
    ctx = StepContext(model, batch, out, model.loss(batch, out))
    for site in ("embedding", "input", "hidden", "output", "weight_hh"):
        for structure in ("element", "model"):
            reg = ExplicitDropoutRegularizer(1.0, sites=[site], structure=structure)
            assert reg.penalty(ctx).item() > 0, (site, structure)
    total = ExplicitDropoutRegularizer(1.0).penalty(ctx)
    grads = _grads(model, total)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert all(g is not None and g.abs().sum() > 0 for n, g in zip(names, grads) if not n.startswith("init_")), names


def test_paper_coefficients():
    rule = algorithm2(0.4)
    assert rule.regularizers[0].coefficients == pytest.approx(2 / 3)
    assert rule.regularizers[1].coefficients == pytest.approx(math.sqrt(2 / 3))
    four = algorithm4(0.4, 8)
    assert four.objective.k == 8
    assert four.regularizers[0].coefficients == pytest.approx(math.sqrt(2 / 3) * math.sqrt(7 / 8))
    assert algorithm4(0.4, 1).regularizers == []
    assert dropout_k_noise_scale(1) == 0.0


@pytest.mark.parametrize("q", [-0.1, 1.0, 2.0])
def test_bad_probability_errors(q):
    with pytest.raises(EmbregError, match=r"outside \[0, 1\)"):
        dropout_variance(q)
    with pytest.raises(EmbregError, match=r"outside \[0, 1\)"):
        ExplicitDropoutRegularizer.from_dropout(q)
    with pytest.raises(EmbregError, match=r"outside \[0, 1\)"):
        algorithm2(q)


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_bad_k_errors(k):
    with pytest.raises(EmbregError, match="k="):
        DropoutK(k)
    with pytest.raises(EmbregError, match="k="):
        TwoMaskDropoutNoise(k)


def test_sites_not_in_the_model_error_and_list_the_sites():
    model, batch = _model(dropout=False), _batch()
    out = model(batch)
    ctx = StepContext(model, batch, out, model.loss(batch, out))
    with pytest.raises(EmbregError, match="'decoder' is not in the model.*hidden.0"):
        ExplicitDropoutRegularizer(1.0, sites=["decoder"]).penalty(ctx)
    with pytest.raises(EmbregError, match="match none"):
        ImplicitDropoutNoise({"output": 1.0, "outptu": 1.0}, sites=["output"]).penalty(ctx)
    with pytest.raises(EmbregError, match="dropout_sites"):
        ExplicitDropoutRegularizer(1.0).penalty(StepContext(torch.nn.Linear(2, 2), batch, out, out.predictions.sum()))
    with pytest.raises(EmbregError, match="form"):
        ExplicitDropoutRegularizer(1.0, form="hessain")
    with pytest.raises(EmbregError, match=">= 0"):
        ExplicitDropoutRegularizer(-1.0)


def test_site_names_and_groups():
    names = ["embedding", "input", "hidden.0", "hidden.1", "output"]
    assert resolve_names(names, ["hidden"]) == ["hidden.0", "hidden.1"]
    assert resolve_names(names, None) == names
    assert per_site({"hidden": 2.0, "hidden.1": 3.0}, ["hidden.0", "hidden.1"]) == {"hidden.0": 2.0, "hidden.1": 3.0}

"""The LSTM LM's index transforms (SSE on input words, label SSE on targets) and its layer stack (LNSR).

sse-stochastic-shared-embeddings.txt (SSE-SE, eq. 5; label-side SSE); lnsr-noise-stability-bert.txt, Sec. 3.1
(LNSR) and 5.4 (R3F, SMART).
"""

from __future__ import annotations

import pytest
import torch

from embreg.errors import ConfigError
from embreg.models import LSTMLanguageModel
from embreg.models.hidden_states import hidden_state_key
from embreg.nn import dropout_disabled
from embreg.regularizers import (
    LNSR,
    R3F,
    SMART,
    ExplicitDropoutRegularizer,
    ImplicitDropoutNoise,
    LayerNoise,
    StepContext,
    layer_stack,
)
from embreg.sse import SSE, LabelSSE

V = 40
DROPOUT = {"q_embedding": 0.1, "q_input": 0.2, "q_hidden": 0.2, "q_output": 0.3, "q_weight": 0.2}


def _batch(index=None, reset=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    batch = {"input": torch.randint(0, V, (3, 7), generator=g), "target": torch.randint(0, V, (3, 7), generator=g)}
    if index is not None:
        batch.update(index=torch.tensor(index), reset=torch.tensor(reset))
    return batch


def _lm(**kwargs) -> LSTMLanguageModel:
    torch.manual_seed(0)
    return LSTMLanguageModel.build(V, 8, 12, 2, **kwargs)


# ------------------------------------------------------------------------------------------------- transforms
@pytest.mark.parametrize("unroll", [False, True])
def test_transforms_at_p_zero_reproduce_the_plain_model_exactly(unroll) -> None:
    plain = _lm(unroll=unroll, **DROPOUT).train()
    with_transforms = _lm(
        unroll=unroll, input_transform=SSE(V, 0.0, seed=0), label_transform=LabelSSE(V, 0.0, seed=0), **DROPOUT
    ).train()
    for index in range(3):
        batch = _batch(index, reset=index == 0, seed=index)
        torch.manual_seed(10 + index)
        a = plain(batch)
        loss_a = plain.loss(batch, a)
        torch.manual_seed(10 + index)
        b = with_transforms(batch)
        loss_b = with_transforms.loss(batch, b)
        assert torch.equal(a.predictions, b.predictions) and torch.equal(loss_a, loss_b)
        loss_a.backward()
        loss_b.backward()
        for (name, p), q in zip(plain.named_parameters(), with_transforms.parameters(), strict=True):
            assert (p.grad is None) == (q.grad is None), name
            assert p.grad is None or torch.equal(p.grad, q.grad), name


def test_input_sse_swaps_the_ids_the_embedding_sees_in_training_only() -> None:
    model = _lm(input_transform=SSE(V, 0.5, seed=0)).train()
    plain = _lm().train()
    batch = _batch()
    out = model(batch)
    swapped = out.hidden["input_ids"]
    assert swapped.shape == batch["input"].shape and not torch.equal(swapped, batch["input"])
    assert 0.3 < (swapped != batch["input"]).float().mean().item() < 0.7
    # the output is the plain model's output on the swapped ids (no dropout: the same computation)
    assert torch.equal(out.predictions, plain(dict(batch, input=swapped)).predictions)
    assert not torch.equal(out.predictions, plain(batch).predictions)
    model.eval()
    plain.eval()
    out = model(batch)
    assert torch.equal(out.hidden["input_ids"], batch["input"])
    assert torch.equal(out.predictions, plain(batch).predictions)


def test_the_swap_is_drawn_once_per_step() -> None:
    model = _lm(input_transform=SSE(V, 0.5, seed=0), **DROPOUT).train()
    batch = _batch(0, reset=True)
    first = model(batch).hidden["input_ids"]
    assert torch.equal(model(batch).hidden["input_ids"], first)  # Dropout_k's k passes, a regulariser's pass
    with dropout_disabled(model):  # the analytic regularisers' clean pass
        assert torch.equal(model(batch).hidden["input_ids"], first)
    assert not torch.equal(model(_batch(1, seed=0)).hidden["input_ids"], first)  # next window: new draw
    plain = _batch()
    a = model(plain).hidden["input_ids"]
    assert torch.equal(model(plain).hidden["input_ids"], a)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.loss(plain, model(plain)).backward()
    optimizer.step()  # a new step over the same batch object draws anew
    assert not torch.equal(model(plain).hidden["input_ids"], a)


def test_dropout_sites_use_the_transformed_ids() -> None:
    model = _lm(input_transform=SSE(V, 0.5, seed=0), **DROPOUT).train()
    batch = _batch(0, reset=True)
    out = model(batch)
    site = model.dropout_sites(batch, out)["embedding"]
    assert site.ids is out.hidden["input_ids"]
    for reg in (ExplicitDropoutRegularizer(0.1), ImplicitDropoutNoise(0.1)):
        value = reg.penalty(StepContext(model, batch, output=out, loss=model.loss(batch, out)))
        assert torch.isfinite(value)


def test_label_sse_changes_the_loss_in_training_only() -> None:
    model = _lm(label_transform=LabelSSE(V, 0.5, seed=0)).train()
    plain = _lm().train()
    batch = _batch()
    out, ref = model(batch), plain(batch)
    assert torch.equal(out.predictions, ref.predictions)
    loss = model.loss(batch, out)
    assert loss.item() != pytest.approx(plain.loss(batch, ref).item())
    assert torch.equal(model.loss(batch, out), loss)  # drawn once per step
    targets = model.step_targets(batch)
    assert not torch.equal(targets, batch["target"])
    assert torch.equal(loss, plain.loss(dict(batch, target=targets), ref))
    assert not model.loss_is_mean_cross_entropy  # the analytic regularisers take the autograd path
    model.eval()
    plain.eval()
    assert model.loss_is_mean_cross_entropy
    assert torch.equal(model.loss(batch, model(batch)), plain.loss(batch, plain(batch)))


def test_transforms_pass_through_build_and_are_saved() -> None:
    model = _lm(input_transform=SSE(V, 0.1, seed=3), label_transform=LabelSSE(V, 0.1, seed=4))
    keys = model.state_dict()
    assert "input_transform._extra_state" in keys and "label_transform._extra_state" in keys
    assert not any(k.startswith("stack_layers") for k in keys)
    assert set(_lm().state_dict()) == {k for k in keys if "transform" not in k}


# ------------------------------------------------------------------------------------------------ layer stack
@pytest.mark.parametrize("unroll", [False, True])
def test_stack_reproduces_the_forward_from_the_carried_state(unroll) -> None:
    model = _lm(unroll=unroll, learn_init=True).eval()
    model(_batch(0, reset=True, seed=0))
    batch = _batch(1, seed=1)  # starts from the state the first window ended in
    out = model(batch)
    stack = layer_stack(model)
    states = stack.clean_states(out)
    assert stack.num_layers == 2 and [tuple(h.shape) for h in states] == [(3, 7, 8), (3, 7, 12), (3, 7, 8)]
    again = stack.run(states[0], batch, 1)
    assert torch.equal(again[0], states[1]) and torch.equal(again[1], states[2])
    assert torch.equal(stack.run(states[1], batch, 2)[0], states[2])
    torch.testing.assert_close(stack.predict(again[-1], batch), out.predictions, rtol=0, atol=0)
    model.reset_state()
    fresh = model.forward_sequence(batch["input"])[0]  # from the initial state: another result
    assert not torch.allclose(fresh.predictions, out.predictions)


def test_stack_errors_are_clear() -> None:
    model = _lm()
    with pytest.raises(ConfigError, match="none has run yet"):
        layer_stack(model).run(torch.zeros(3, 7, 8), _batch())
    model(_batch())
    with pytest.raises(ConfigError, match="got 2 sequences but the last forward pass ran 3"):
        layer_stack(model).run(torch.zeros(2, 7, 8), _batch())
    with pytest.raises(ConfigError, match=r"start_layer=3 is outside the model's layer range \[1, 2\]"):
        LNSR(start_layer=3).prepare(model)


@pytest.mark.parametrize("start", [1, 2])
def test_lnsr_on_the_lm_is_finite_reaches_the_parameters_and_replays_dropout(start) -> None:
    model = _lm(input_transform=SSE(V, 0.2, seed=0), **DROPOUT).train()
    lnsr = LNSR(sigma=0.1, start_layer=start)
    model = lnsr.prepare(model)
    model(_batch(0, reset=True))
    batch = _batch(1, seed=1)
    out = model(batch)
    value = lnsr.penalty(StepContext(model, batch, output=out))
    assert value.dim() == 0 and torch.isfinite(value) and value.item() > 0
    value.backward()
    for layer in range(start - 1, 2):
        assert model.rnns[layer].module.weight_ih_l0.grad.abs().sum() > 0
        assert model.rnns[layer].module.weight_hh_l0.grad.abs().sum() > 0
    if start == 1:
        assert model.embedding.weight.grad.abs().sum() > 0
    # replayed dropout (DropConnect and locked masks): vanishing noise, vanishing penalty
    tiny = LNSR(sigma=1e-9, start_layer=start)
    tiny.prepare(model)
    out = model(_batch(2, seed=2))
    assert tiny.penalty(StepContext(model, _batch(2, seed=2), output=out)).item() < 1e-10
    fresh = LNSR(sigma=1e-9, start_layer=start, replay_dropout=False)
    assert fresh.penalty(StepContext(model, _batch(2, seed=2), output=out)).item() > 1e-6


def test_a_few_lm_steps_with_lnsr_lower_the_loss() -> None:
    model = _lm(q_hidden=0.1, label_transform=LabelSSE(V, 0.05, seed=0))
    lnsr = LNSR(sigma=0.05)
    model = lnsr.prepare(model).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    batch = _batch()
    losses = []
    for _ in range(20):
        out = model(batch)
        loss = model.loss(batch, out)
        optimizer.zero_grad()
        (loss + lnsr.penalty(StepContext(model, batch, output=out, loss=loss))).backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_layer_noise_on_the_lm_perturbs_training_only() -> None:
    model = _lm().eval()
    batch = _batch()
    clean = model(batch).predictions
    model = LayerNoise(sigma=0.5, start_layer=2).prepare(model)
    assert torch.equal(model(batch).predictions, clean)
    assert not torch.allclose(model.train()(batch).predictions, clean)


def test_r3f_and_smart_take_sequence_logits_per_token() -> None:
    from embreg.regularizers.divergence import symmetric_kl

    model = _lm().train()
    batch = _batch()
    for reg in (R3F(weight=1.0, sigma=1e-3), SMART(weight=1.0, epsilon=1e-3)):
        model = reg.prepare(model)
        penalty = reg.penalty(StepContext(model, batch, output=model(batch)))
        assert penalty.ndim == 0 and torch.isfinite(penalty) and penalty > 0
    a, b = torch.randn(3, 7, 40), torch.randn(3, 7, 40)  # the (B, T, V) form is the mean over the B * T tokens
    assert torch.allclose(symmetric_kl(a, b), symmetric_kl(a.reshape(-1, 40), b.reshape(-1, 40)))


def test_hidden_states_are_returned_beside_the_dropout_sites() -> None:
    model = _lm().eval()
    out = model(_batch())
    assert {"input", "hidden.0", "output", "input_ids"} <= set(out.hidden)
    assert torch.equal(out.hidden[hidden_state_key(2)], out.hidden["output"])
    assert torch.equal(out.hidden[hidden_state_key(1)], out.hidden["hidden.0"])  # eval: dropout is identity
    assert sorted(model.dropout_sites(_batch(), out)) == [
        "embedding",
        "hidden.0",
        "input",
        "output",
        "weight_hh.0",
        "weight_hh.1",
    ]

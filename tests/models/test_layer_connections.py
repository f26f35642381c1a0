"""Layer connections and LSTM tricks as settings of the existing models (LSTM LM, NCF, DLRM).

Every setting changes the built model, a setting with nothing to act on is refused, the layer stacks still re-run
the forward pass, and the default ``connections: none`` keeps today's models (same parameters, same outputs).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.models import DLRM, NCF
from embreg.models.lstm_lm import LSTMLanguageModel
from embreg.models.mlp import mlp
from embreg.nn.connections import DenseLayer, HighwayLayer, ResidualLayer
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from tests.helpers.recipes import base_recipe

KINDS = ["residual", "highway", "dense"]
LM_BATCH = {"input": torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]]), "target": torch.tensor([[2, 3, 4, 5], [6, 7, 8, 9]])}
CTR_BATCH = {
    "categorical": torch.tensor([[0, 6], [4, 1], [2, 2]]),
    "dense": torch.randn(3, 3),
    "label": torch.tensor([1.0, 0.0, 1.0]),
}
NCF_BATCH = {"user": torch.tensor([0, 1, 2]), "item": torch.tensor([3, 4, 3]), "rating": torch.tensor([4.0, 2.0, 5.0])}


def _lm(connections: str = "none", **kwargs: Any) -> LSTMLanguageModel:
    torch.manual_seed(0)
    return LSTMLanguageModel.build(20, 8, 12, 3, connections=connections, **kwargs)


def _ncf(connections: str = "none") -> NCF:
    torch.manual_seed(0)
    return NCF(nn.Embedding(5, 8), nn.Embedding(6, 8), mlp_dims=(16, 16, 4), connections=connections)


def _dlrm(connections: str = "none") -> DLRM:
    torch.manual_seed(0)
    return DLRM([nn.Embedding(5, 4), nn.Embedding(7, 4)], num_dense=3, top_mlp=(8, 6), connections=connections)


# ------------------------------------------------------------------------------------------- defaults unchanged
def test_the_default_mlp_is_the_plain_stack() -> None:
    torch.manual_seed(0)
    default = mlp(8, (16, 4), dropout=0.1)
    torch.manual_seed(0)
    named = mlp(8, (16, 4), dropout=0.1, connections="none")
    assert [type(m) for m in default] == [nn.Linear, nn.LeakyReLU, nn.Dropout] * 2
    assert all(torch.equal(a, b) for a, b in zip(default.state_dict().values(), named.state_dict().values()))


def test_default_models_keep_their_state_dict_keys_and_outputs() -> None:
    lm, ncf, dlrm = _lm(), _ncf(), _dlrm()
    assert [k for k in lm.state_dict() if "connections" in k or "gate" in k or "shortcut" in k] == []
    assert sorted(k for k in ncf.state_dict() if k.startswith("mlp.")) == sorted(
        f"mlp.{i}.{p}" for i in (0, 2, 4) for p in ("weight", "bias")
    )
    assert sorted(k for k in dlrm.state_dict() if k.startswith("top.")) == sorted(
        f"top.{i}.{p}" for i in (0, 2, 4) for p in ("weight", "bias")
    )
    lm.eval()
    torch.manual_seed(0)
    plain = LSTMLanguageModel.build(20, 8, 12, 3).eval()  # built without naming the setting
    assert torch.equal(lm(LM_BATCH).predictions, plain(LM_BATCH).predictions)


def test_default_models_give_the_outputs_they_gave_before_the_setting_existed() -> None:
    """Readings taken with the code before ``connections`` existed (same seeds, same draws): bit for bit on this
    machine; the tolerance only absorbs other BLAS builds."""
    torch.manual_seed(0)
    lm = LSTMLanguageModel.build(50, 8, 12, 3, q_input=0.3, q_hidden=0.3).train()
    batch = {"input": torch.randint(0, 50, (2, 6)), "target": torch.randint(0, 50, (2, 6))}
    torch.manual_seed(1)
    lm_out = lm(batch).predictions.detach()
    torch.manual_seed(0)
    ncf = NCF(nn.Embedding(5, 8), nn.Embedding(6, 8), dropout=0.2).train()
    torch.manual_seed(1)
    ncf_out = ncf({"user": torch.tensor([0, 1]), "item": torch.tensor([2, 3])}).predictions.detach()
    torch.manual_seed(0)
    dlrm = DLRM([nn.Embedding(5, 4), nn.Embedding(7, 4)], num_dense=3)
    dlrm_out = dlrm({"categorical": torch.tensor([[0, 6], [4, 1]]), "dense": torch.ones(2, 3)}).predictions.detach()
    expected_lm = [0.005104828625917435, 0.012303669936954975, 0.002771941479295492, 0.0015765370335429907]
    assert torch.allclose(lm_out.flatten()[:4], torch.tensor(expected_lm), atol=1e-6)
    assert lm_out.double().sum().item() == pytest.approx(-2.1884496302627667, abs=1e-5)
    assert torch.allclose(ncf_out, torch.tensor([-0.12293297052383423, 0.6039940714836121]), atol=1e-6)
    assert torch.allclose(dlrm_out, torch.tensor([-0.0393497571349144, -0.0008832450839690864]), atol=1e-6)


# --------------------------------------------------------------------------------------------------- built models
@pytest.mark.parametrize("kind", KINDS)
def test_every_connection_changes_the_models_and_their_stacks_rerun_the_forward(kind: str) -> None:
    for build, batch in ((_lm, LM_BATCH), (_ncf, NCF_BATCH), (_dlrm, CTR_BATCH)):
        model, plain = build(kind).eval(), build().eval()
        assert sum(p.numel() for p in model.parameters()) > sum(p.numel() for p in plain.parameters())
        out = model(batch)
        assert not torch.allclose(out.predictions, plain(batch).predictions)
        stack = model.layer_stack()
        states = stack.clean_states(out)
        assert torch.allclose(stack.predict(stack.run(states[0], batch)[-1], batch), out.predictions, atol=1e-6)
        model.train()
        model.loss(batch, model(batch)).backward()
        missing = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.any())]
        assert missing == [], (type(model).__name__, missing)


def test_the_lstm_connections_follow_the_formulas() -> None:
    residual, highway, dense = _lm("residual").eval(), _lm("highway").eval(), _lm("dense").eval()
    assert [type(c) for c in residual.connections] == [ResidualLayer, ResidualLayer]
    assert [type(c) for c in highway.connections] == [HighwayLayer, HighwayLayer]
    assert [rnn.module.input_size for rnn in dense.rnns] == [8, 8 + 12, 8 + 12 + 12]  # [x^1; ...; x^l]
    assert residual.connections[0].shortcut is None and residual.connections[1].shortcut is not None  # 12 -> 8
    x = residual.layer_stack().clean_states(residual(LM_BATCH))
    out, _ = residual.stack_layers[1].rnns[1](x[1], residual.window_state(2)[1])
    assert torch.allclose(x[2], out + x[1], atol=1e-6)  # h = LSTM(x) + x


def test_the_mlp_connections_wrap_the_hidden_layers_and_keep_the_output_layer_plain() -> None:
    model = _dlrm("dense")
    assert [type(m) for m in model.top] == [DenseLayer, DenseLayer, nn.Linear]
    assert [type(m) for m in model.bottom] == [DenseLayer, DenseLayer]
    assert [type(m) for m in _ncf("highway").mlp] == [HighwayLayer] * 3
    with pytest.raises(ValueError, match="no layer to connect"):
        DLRM([nn.Embedding(5, 4), nn.Embedding(7, 4)], num_dense=0, top_mlp=(), connections="residual")


# --------------------------------------------------------------------------------------------- LSTM tricks
def test_the_learned_initial_state_and_the_down_projection_change_the_model() -> None:
    plain, learned = _lm(), _lm(learn_init=True)
    trainable = [sum(p.numel() for p in m.parameters() if p.requires_grad) for m in (plain, learned)]
    assert trainable[1] == trainable[0] + 2 * (12 + 12 + 8)  # (h, c) of every layer
    learned.loss(LM_BATCH, learned(LM_BATCH)).backward()
    assert all(p.grad is not None and p.grad.any() for p in [*learned.init_h, *learned.init_c])
    projected = _lm(proj_dim=8, tie=True)
    assert projected.projection is not None and projected.rnns[-1].module.hidden_size == 12
    assert projected(LM_BATCH).predictions.shape == (2, 4, 20)


# ---------------------------------------------------------------------------------------------- recipes
def _fingerprint(model: nn.Module) -> tuple[int, tuple[tuple[str, int], ...]]:
    kinds = Counter(type(m).__name__ for m in model.modules())
    return sum(p.numel() for p in model.parameters()), tuple(sorted(kinds.items()))


_PREPARED: dict[str, Any] = {}


def _build(model: str, overrides: list[str]) -> nn.Module:
    recipe = load_recipe(base_recipe(model), [*load_recipe(base_recipe(model)).adapter.smoke_overrides, *overrides])
    built = build_run(recipe, prepared=_PREPARED.get(model))
    _PREPARED.setdefault(model, built.prepared)
    return built.model


@pytest.mark.integration
@pytest.mark.parametrize("model", ["lstm-lm", "ncf", "dlrm"])
def test_every_connections_setting_of_a_recipe_changes_the_built_model(model: str) -> None:
    stacked = ["model.layers=2"] if model == "lstm-lm" else []  # the plainest LM recipe has one layer
    default = _fingerprint(_build(model, stacked))
    prints = {kind: _fingerprint(_build(model, [*stacked, f"model.connections={kind}"])) for kind in KINDS}
    assert default not in prints.values() and len(set(prints.values())) == len(KINDS)


@pytest.mark.integration
def test_the_lstm_tricks_of_a_recipe_change_the_built_model() -> None:
    def trainable(model: nn.Module) -> int:
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    default = _build("lstm-lm", [])
    assert trainable(_build("lstm-lm", ["model.learn_init=true"])) > trainable(default)
    assert _fingerprint(_build("lstm-lm", ["model.proj_dim=200"])) != _fingerprint(default)


def test_a_connection_with_nothing_to_connect_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"model.connections='highway' connects stacked LSTM layers.*layers=1"):
        load_recipe(base_recipe("lstm-lm"), ["model.layers=1", "model.connections=highway"])
    for model in ("lstm-lm", "ncf", "dlrm"):
        with pytest.raises(ConfigError, match="connections"):
            load_recipe(base_recipe(model), ["model.connections=skip"])

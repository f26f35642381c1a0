"""Layer connections: the document's formulas by hand, shapes, gradients, eval/train, bad settings."""

from __future__ import annotations

import doctest

import pytest
import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.nn.connections import (
    GATE_BIAS,
    DenseLayer,
    HighwayLayer,
    ResidualLayer,
    base,
    check_connection,
    connected_layers,
    dense_layer,
    highway,
    highway_layer,
    residual,
    residual_layer,
    stack,
)


def _block(i: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, o), nn.ReLU(), nn.Dropout(0.5))


def test_highway_equals_the_formula_by_hand() -> None:
    torch.manual_seed(0)
    layer = HighwayLayer(_block(4, 4), 4, 4).eval()
    x = torch.randn(3, 4)
    linear, gate = layer.block[0], layer.gate
    g = torch.relu(x @ linear.weight.T + linear.bias)
    t = torch.sigmoid(x @ gate.weight.T + gate.bias)
    assert torch.allclose(layer(x), t * g + (1 - t) * x, atol=1e-6)
    assert torch.all(gate.bias == GATE_BIAS)  # starts close to carrying the input
    assert layer.shortcut is None


def test_highway_and_residual_project_the_input_when_the_widths_differ() -> None:
    torch.manual_seed(1)
    x = torch.randn(3, 4)
    res = ResidualLayer(_block(4, 2), 4, 2).eval()
    assert torch.allclose(res(x), res.block(x) + x @ res.shortcut.weight.T, atol=1e-6)
    assert res.shortcut.bias is None
    hw = HighwayLayer(_block(4, 2), 4, 2).eval()
    t = torch.sigmoid(hw.gate(x))
    assert torch.allclose(hw(x), t * hw.block(x) + (1 - t) * hw.shortcut(x), atol=1e-6)


def test_residual_and_highway_functions_by_hand() -> None:
    x, g = torch.tensor([[1.0, -2.0]]), torch.tensor([[0.5, 3.0]])
    assert torch.equal(residual(x, g), x + g)
    w, b = torch.zeros(2, 2), torch.tensor([0.0, 100.0])  # gates 0.5 and ~1
    assert torch.allclose(highway(x, g, w, b), torch.tensor([[0.75, 3.0]]))


def test_dense_layers_read_every_earlier_state() -> None:
    torch.manual_seed(2)
    layers = connected_layers("dense", 4, [3, 2, 5], _block)
    assert [layer.in_dim for layer in layers] == [4, 7, 9]
    net = nn.Sequential(*layers).eval()
    x = torch.randn(6, 4)
    h1 = layers[0].block(x)
    h2 = layers[1].block(torch.cat([x, h1], -1))
    h3 = layers[2].block(torch.cat([x, h1, h2], -1))  # h^3 = g(W [x^1; x^2; x^3] + b)
    assert torch.allclose(net(x), h3, atol=1e-6)


@pytest.mark.parametrize("kind", ["residual", "highway", "dense"])
def test_gradients_reach_every_parameter_and_eval_is_deterministic(kind: str) -> None:
    torch.manual_seed(3)
    net = nn.Sequential(*connected_layers(kind, 4, [4, 3], _block))
    x = torch.randn(8, 4)
    net(x).pow(2).sum().backward()
    for name, param in net.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    net.eval()
    assert torch.equal(net(x), net(x))  # the block's dropout is off in eval
    net.train()
    assert not torch.equal(net(x), net(x))


def test_bad_settings_are_refused() -> None:
    with pytest.raises(EmbregError, match=r"connections='skip' is not one of \('none', 'residual'"):
        check_connection("skip")
    with pytest.raises(ValueError, match="kind='none'"):
        connected_layers("none", 4, [4], _block)
    with pytest.raises(EmbregError, match="built without a block"):
        ResidualLayer(None, 4, 4)(torch.zeros(1, 4))
    with pytest.raises(EmbregError, match="in_dim=0"):
        DenseLayer(None, 0, 4, last=True)


@pytest.mark.parametrize("module", [base, dense_layer, highway_layer, residual_layer, stack], ids=str)
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module, extraglobs={"torch": torch, "nn": nn})
    assert result.failed == 0 and result.attempted > 0

"""NCF's and DLRM's linear layers start as the mixed-dimension paper's protocol says (Appendix I: uniform Xavier
for every matrix), with zero biases."""

import pytest
import torch
from torch import nn

from embreg.models import DLRM, NCF


def _linears(model: nn.Module) -> list[nn.Linear]:
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


@pytest.mark.parametrize(
    "make",
    [
        lambda: NCF(nn.Embedding(5, 8), nn.Embedding(6, 8)),
        lambda: DLRM([nn.Embedding(5, 8), nn.Embedding(7, 8)], 3, dim=8, bottom_mlp=(64,), top_mlp=(64, 32)),
    ],
)
def test_every_linear_layer_starts_xavier_uniform_with_zero_biases(make):
    torch.manual_seed(0)
    linears = _linears(make())
    assert len(linears) >= 3
    for layer in linears:
        fan_out, fan_in = layer.weight.shape
        bound = (6.0 / (fan_in + fan_out)) ** 0.5
        # torch's default start draws the biases too, from U(+-1/sqrt(fan_in))
        assert layer.weight.abs().max() <= bound
        assert layer.weight.abs().max() > 0.8 * bound
        assert torch.equal(layer.bias, torch.zeros_like(layer.bias))

"""packed_dropout / PackedDropout: identity in eval and at p = 0, drop rate and scale, gradients, pausing, seeding."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embreg.nn import dropout_disabled
from embreg.nn.packed_dropout import LEVELS, PackedDropout, packed_dropout, packed_keep_mask


def test_identity_in_eval_and_at_zero() -> None:
    x = torch.randn(3, 5)
    assert packed_dropout(x, 0.3, training=False) is x
    assert packed_dropout(x, 0.0) is x
    assert torch.equal(PackedDropout(0.3).eval()(x), x)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_drop_rate_and_scale_keep_the_expectation(p: float) -> None:
    torch.manual_seed(0)
    x = torch.ones(400_000)
    y = packed_dropout(x, p)
    dropped = round(p * LEVELS) / LEVELS
    kept = y != 0
    # binomial standard error of the rate: sqrt(p (1 - p) / n) <= 0.0008; 5 of them
    assert abs((~kept).float().mean().item() - p) < 0.004
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / (1 - dropped)))
    assert abs(y.mean().item() - 1.0) < 0.01


def test_every_lane_of_a_packed_word_drops_at_the_same_rate() -> None:
    torch.manual_seed(1)
    mask = packed_keep_mask((100_000, 4), 0.25)  # column k: lane k of the 64-bit words
    rates = 1 - mask.float().mean(dim=0)
    assert torch.all((rates - 0.25).abs() < 0.01), rates


def test_gradient_flows_through_kept_elements_only() -> None:
    torch.manual_seed(2)
    x = torch.randn(50, 20, requires_grad=True)
    y = packed_dropout(x, 0.4)
    y.sum().backward()
    kept = y.detach() != 0
    assert torch.allclose(x.grad[kept], torch.full_like(x.grad[kept], 1 / (1 - round(0.4 * LEVELS) / LEVELS)))
    assert x.grad[~kept].abs().max() == 0


def test_seeded_by_torch_and_paused_like_torch_dropout() -> None:
    layer = PackedDropout(0.5)
    x = torch.ones(1000)
    torch.manual_seed(3)
    first = layer(x)
    torch.manual_seed(3)
    assert torch.equal(layer(x), first)
    model = nn.Sequential(layer)
    with dropout_disabled(model):
        assert torch.equal(model(x), x)
    assert not torch.equal(model(x), x)
    with pytest.raises(ValueError, match="in place"):
        PackedDropout(0.1, inplace=True)

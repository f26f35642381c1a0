"""label_smoothed_cross_entropy: equal to torch's composite loss in value and gradient, gradcheck in float64."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from embreg.nn.label_smoothed_loss import label_smoothed_cross_entropy


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_value_and_gradient_equal_torchs_label_smoothed_cross_entropy(epsilon: float) -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(37, 50, generator=generator, dtype=torch.float64) * 3
    labels = torch.randint(0, 50, (37,), generator=generator)
    labels[::5] = 0  # the padding id, ignored
    ours_input = logits.clone().requires_grad_()
    theirs_input = logits.clone().requires_grad_()
    ours = label_smoothed_cross_entropy(ours_input, labels, epsilon, ignore_index=0)
    theirs = F.cross_entropy(theirs_input, labels, ignore_index=0, label_smoothing=epsilon)
    ours.backward()
    theirs.backward()
    assert torch.allclose(ours, theirs, atol=1e-12)
    assert torch.allclose(ours_input.grad, theirs_input.grad, atol=1e-12)
    assert ours_input.grad[::5].abs().max() == 0  # ignored rows get no gradient


def test_gradcheck_in_float64() -> None:
    logits = torch.randn(6, 9, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([1, 8, -100, 0, 4, 4])
    assert torch.autograd.gradcheck(lambda z: label_smoothed_cross_entropy(z, labels, 0.1) * 2.5, (logits,))


def test_without_gradients_and_with_every_row_ignored() -> None:
    logits = torch.randn(4, 6)
    labels = torch.tensor([1, 2, 3, 4])
    with torch.no_grad():
        value = label_smoothed_cross_entropy(logits, labels, 0.1)
    assert torch.allclose(value, F.cross_entropy(logits, labels, label_smoothing=0.1))
    ignored = label_smoothed_cross_entropy(logits.requires_grad_(), torch.full((4,), -100), 0.1)
    ignored.backward()
    assert ignored.item() == 0.0 and logits.grad.abs().max() == 0


def test_bad_shapes_and_epsilon_are_refused() -> None:
    with pytest.raises(ValueError, match="logits must be"):
        label_smoothed_cross_entropy(torch.randn(2, 3, 4), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="epsilon=1.0"):
        label_smoothed_cross_entropy(torch.randn(2, 3), torch.zeros(2, dtype=torch.long), 1.0)

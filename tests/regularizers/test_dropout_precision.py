"""The dropout regularisers' estimators on float16 / bfloat16 gradients (autocast): sums over the batch in float32.

A float16 sum of squares overflows at 65504. The batch below is large enough that every sum of the identity form and
of R_approx exceeds it, as a language model's batch of a few thousand tokens over a 10k vocabulary does.
"""

from __future__ import annotations

import pytest
import torch

from embreg.nn.dropout_sites import DropoutSite
from embreg.regularizers.dropout.functional import (
    cross_entropy_logit_grad,
    r_approx,
    r_approx_identity,
    r_tilde_approx,
    xi_approx_surrogate,
)

N, H, C = 512, 256, 1000
FLOAT16_MAX = torch.finfo(torch.float16).max


def _estimates(inputs: torch.dtype, compute: torch.dtype) -> dict[str, torch.Tensor]:
    """The estimates from inputs rounded to ``inputs``, computed in ``compute``."""
    generator = torch.Generator().manual_seed(0)
    h = (torch.randn(N, H, generator=generator) * 60).to(inputs).to(compute).requires_grad_()
    weight = (torch.randn(H, C, generator=generator) * 0.05).to(inputs).to(compute)
    labels = torch.randint(0, C, (N,), generator=generator)
    logits = h @ weight
    sites, coefficients = {"h": DropoutSite(h)}, {"h": 2 / 3}
    probs = torch.softmax(logits.float(), dim=-1)
    loss = torch.nn.functional.cross_entropy(logits.float(), labels)
    noise = xi_approx_surrogate(
        loss,
        sites,
        {"h": 0.8 / N},
        logits=logits,
        logits_grad=cross_entropy_logit_grad(probs, labels),
        generator=torch.Generator().manual_seed(2),
    )
    (noise_grad,) = torch.autograd.grad(noise, h, retain_graph=True)
    return {
        "hessian": r_approx(logits, sites, coefficients, generator=torch.Generator().manual_seed(1)),
        "identity": r_approx_identity(logits, sites, coefficients, generator=torch.Generator().manual_seed(1)),
        "loss_jacobian": r_tilde_approx(logits, labels, sites, coefficients),
        "xi value": noise,
        "xi gradient norm": noise_grad.float().norm(),
    }


def test_the_batch_overflows_a_float16_sum() -> None:
    reference = _estimates(torch.float16, torch.float32)
    assert reference["identity"].item() * N * C > FLOAT16_MAX  # the sum of squares before the 1 / (N C)
    assert reference["hessian"].item() * N / (2 / 3) > FLOAT16_MAX  # before the 1 / N and lambda


# bfloat16 keeps 8 significant bits: logits near 50 (this batch) are 0.25 apart, which moves the softmax by up to 13%
@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float16, 0.01), (torch.bfloat16, 0.05)], ids=str)
def test_estimates_from_reduced_precision_gradients_are_those_of_float32(dtype: torch.dtype, tolerance: float) -> None:
    reference, reduced = _estimates(dtype, torch.float32), _estimates(dtype, dtype)
    for name in ("hessian", "identity", "loss_jacobian", "xi gradient norm"):
        assert reduced[name].item() == pytest.approx(reference[name].item(), rel=tolerance), name
        assert reduced[name].dtype == torch.float32, name
    assert reduced["xi value"].item() == 0.0  # s - s.detach(): a NaN here would be inf - inf

"""R3F and SMART under bf16 / fp16 autocast: their 1e-5 perturbations are measured in float32, not rounded away.

Reduced precision rounds noise of the default scale 1e-5 out of nearly every entry of the embedding output
(embreg.regularizers.noise_precision). The model here runs in eval mode (no dropout), so the penalty computed
without autocast is the exact reference.
"""

from __future__ import annotations

import pytest
import torch

from embreg.regularizers import R3F, SMART, StepContext
from embreg.regularizers.layer_stack import layer_stack
from tests.helpers.finetune_tiny import tiny_batch, tiny_classifier

PRECISIONS = [torch.bfloat16, torch.float16]


def _penalty(reg, dtype: torch.dtype | None, train: bool = False) -> tuple[torch.Tensor, torch.nn.Module]:
    model = tiny_classifier(dropout=0.1 if train else 0.0).train(train)
    reg.prepare(model)
    batch = tiny_batch(batch=8)
    torch.manual_seed(3)
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        output = model(batch)
        value = reg.penalty(StepContext(model, batch, output=output))
    return value, model


@pytest.mark.parametrize("dtype", PRECISIONS, ids=str)
def test_reduced_precision_rounds_noise_of_1e_5_out_of_the_embedding_output(dtype: torch.dtype) -> None:
    model, batch = tiny_classifier().eval(), tiny_batch(batch=8)
    x = layer_stack(model).clean_states(model(batch))[0]
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(0)) * 1e-5
    changed = ((x + noise).to(dtype) != x.to(dtype)).float().mean().item()
    assert changed < 0.1  # measured: 0.9% of the entries in bfloat16, 4.4% in float16


@pytest.mark.parametrize("dtype", PRECISIONS, ids=str)
def test_r3f_under_autocast_measures_the_noise_as_in_float32(dtype: torch.dtype) -> None:
    reference, _ = _penalty(R3F(weight=1.0), None)
    value, _ = _penalty(R3F(weight=1.0), dtype)
    assert reference.item() > 0
    assert value.dtype == torch.float32
    assert value.item() == pytest.approx(reference.item(), rel=1e-4, abs=0.0)


@pytest.mark.parametrize("dtype", PRECISIONS, ids=str)
def test_smart_under_autocast_ascends_as_in_float32(dtype: torch.dtype) -> None:
    fp32 = SMART(weight=1.0)
    reference, _ = _penalty(fp32, None)
    reduced = SMART(weight=1.0)
    value, _ = _penalty(reduced, dtype)
    assert value.item() == pytest.approx(reference.item(), rel=1e-4, abs=0.0)
    assert torch.equal(torch.sign(reduced.last_delta), torch.sign(fp32.last_delta))


@pytest.mark.parametrize("reg", [R3F(weight=1.0, replay_dropout=True), SMART(weight=1.0, replay_dropout=True)])
def test_with_dropout_replayed_under_bf16_the_penalty_trains_the_encoder(reg) -> None:
    value, model = _penalty(reg, torch.bfloat16, train=True)
    assert value.item() > 0
    value.backward()
    assert model.encoder.encoder.layer[0].output.dense.weight.grad.abs().sum() > 0

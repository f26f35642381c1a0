"""The translation family's parts on CUDA: the label-smoothed loss, packed dropout's CUDA path, token-budget batches
(on the device and pinned) and greedy and beam decoding agreeing with the CPU's.

Marked ``gpu``: skipped without CUDA (tests/conftest.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from embreg.batching.token_batches import TokenBudgetBatches
from embreg.models.transformer_nmt import TransformerTranslator
from embreg.nn.decoding import beam_search, greedy_decode
from embreg.nn.label_smoothed_loss import label_smoothed_cross_entropy
from embreg.nn.packed_dropout import packed_dropout

pytestmark = pytest.mark.gpu


def test_label_smoothed_loss_on_cuda_equals_torchs() -> None:
    torch.manual_seed(0)
    logits = (torch.randn(300, 4000, device="cuda") * 2).requires_grad_()
    labels = torch.randint(0, 4000, (300,), device="cuda")
    labels[::7] = 0
    ours = label_smoothed_cross_entropy(logits, labels, 0.1, ignore_index=0)
    (grad,) = torch.autograd.grad(ours, logits)
    theirs = F.cross_entropy(logits, labels, ignore_index=0, label_smoothing=0.1)
    (expected,) = torch.autograd.grad(theirs, logits)
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(grad, expected)


def test_packed_dropout_on_cuda_is_torch_dropout() -> None:
    torch.manual_seed(0)
    x = torch.ones(1_000_000, device="cuda")
    y = packed_dropout(x, 0.1)
    assert y.device.type == "cuda"
    assert abs((y == 0).float().mean().item() - 0.1) < 0.003
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / 0.9))


def test_token_budget_batches_on_cuda_and_pinned() -> None:
    source = torch.randint(4, 50, (200, 12))
    source[torch.arange(200), torch.randint(1, 12, (200,))] = 0
    source = source * (torch.arange(12) < (source == 0).int().argmax(dim=1, keepdim=True))
    tensors = {"source": source, "target": source.clone()}
    on_device = list(TokenBudgetBatches(tensors, max_tokens=96, device="cuda", seed=0).epoch(0))
    assert all(b["source"].device.type == "cuda" for b in on_device)
    pinned = list(TokenBudgetBatches(tensors, max_tokens=96, seed=0).pinned().epoch(0))
    assert all(b["source"].is_pinned() for b in pinned)
    assert [b["source"].tolist() for b in pinned] == [b["source"].cpu().tolist() for b in on_device]


def test_greedy_and_beam_decoding_on_cuda_agree_with_the_cpu() -> None:
    torch.manual_seed(0)
    cpu = TransformerTranslator(60, 60, d_model=32, heads=4, encoder_layers=2, decoder_layers=2, feedforward=64).eval()
    gpu = TransformerTranslator(60, 60, d_model=32, heads=4, encoder_layers=2, decoder_layers=2, feedforward=64)
    gpu.load_state_dict(cpu.state_dict())
    gpu = gpu.double().cuda().eval()
    cpu = cpu.double()
    source = torch.randint(4, 60, (16, 9))
    source[:, -1] = 2
    assert greedy_decode(gpu, source.cuda(), 12).tokens == greedy_decode(cpu, source, 12).tokens
    assert beam_search(gpu, source.cuda(), 12, 4, 0.6, 0.2).tokens == beam_search(cpu, source, 12, 4, 0.6, 0.2).tokens

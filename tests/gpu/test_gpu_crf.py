"""The linear-chain CRF on CUDA: the same log-likelihood, gradients and (constrained) decodes as on the CPU.

Marked ``gpu``: skipped without CUDA (tests/conftest.py).
"""

from __future__ import annotations

import pytest
import torch

from embreg.nn.crf import CRF, invalid_transition

pytestmark = pytest.mark.gpu

BIO = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]


@pytest.mark.parametrize("scheme", ["bio", "none"])
def test_crf_on_cuda_equals_the_cpu(scheme: str) -> None:
    torch.manual_seed(0)
    cpu = CRF(len(BIO), tags=BIO, scheme=scheme).double()
    gpu = CRF(len(BIO), tags=BIO, scheme=scheme).double()
    gpu.load_state_dict(cpu.state_dict())
    gpu = gpu.cuda()
    lengths = torch.randint(1, 20, (32,))
    emissions = torch.randn(32, 20, len(BIO), dtype=torch.float64) * 3
    mask = torch.arange(20).unsqueeze(0) < lengths.unsqueeze(1)
    tags = torch.randint(0, len(BIO), (32, 20))
    tags[:, 0] = 0  # O starts every gold path validly; later I- after O are -inf paths only under bio
    ll_cpu = cpu(emissions, tags, mask)
    ll_gpu = gpu(emissions.cuda(), tags.cuda(), mask.cuda())
    torch.testing.assert_close(ll_gpu.cpu(), ll_cpu)
    finite = torch.isfinite(ll_cpu)
    ll_cpu[finite].sum().backward()
    ll_gpu[finite.cuda()].sum().backward()
    for (name, p_cpu), p_gpu in zip(cpu.named_parameters(), gpu.parameters(), strict=True):
        torch.testing.assert_close(p_gpu.grad.cpu(), p_cpu.grad, msg=name)
    decoded = gpu.decode(emissions.cuda(), mask.cuda()).cpu()
    assert torch.equal(decoded, cpu.decode(emissions, mask))
    if scheme == "bio":
        for row, length in zip(decoded.tolist(), lengths.tolist(), strict=True):
            assert invalid_transition([BIO[i] for i in row[:length]], "bio") is None

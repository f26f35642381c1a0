"""SSE's samplers and MD's lookup on CUDA: the same laws (SSE, eqs. 3 and 5) and the same values (MD) as on the CPU.

On CUDA, SSE-SE (``sse_se``, ``SSE``, ``LabelSSE``) takes the one-launch Triton sampler when Triton imports and the
tensor ops under ``EMBREG_SSE_KERNEL=off``; SSE-Graph takes the tensor ops; MD's layer takes the tensor-op lookup.
Marked ``gpu``: skipped without CUDA (tests/conftest.py).
"""

from __future__ import annotations

import math

import pytest
import torch

from embreg.embeddings import MixedDimensionEmbedding
from embreg.sse import SSE, LabelSSE, NeighbourGraph, SSEGraph
from embreg.sse import functional as F
from embreg.sse._cuda_sampler import cuda_sampler
from embreg.sse._validation import check_ids_range
from tests.helpers.sse_helpers import (
    FULL_HUB_EDGES,
    HUB_AND_ISOLATED_EDGES,
    empirical_transitions,
    row_total_variation,
    se_matrix,
)

pytestmark = pytest.mark.gpu

DEVICE = torch.device("cuda")
DRAWS = 1_200_000


def _generator(seed: int) -> torch.Generator:
    return torch.Generator(device=DEVICE).manual_seed(seed)


def test_sse_se_on_cuda_follows_eq5_and_never_swaps_an_id_to_itself() -> None:
    num_ids, p = 8, 0.3
    ids = torch.arange(num_ids, device=DEVICE).repeat(DRAWS // num_ids)
    out = F.sse_se(ids, num_ids, p=p, generator=_generator(7))
    assert out.device.type == "cuda" and out.dtype == ids.dtype
    tv = row_total_variation(empirical_transitions(ids.cpu(), out.cpu(), num_ids), se_matrix(num_ids, p))
    assert float(tv.max()) < 0.01
    swapped = F.sse_se(ids, num_ids, p=1.0, generator=_generator(8))
    assert not (swapped == ids).any()


def test_sse_module_on_cuda_swaps_at_rate_p() -> None:
    n, p = 1_000_000, 0.1
    ids = torch.randint(0, 1000, (n,), device=DEVICE)
    out = SSE(1000, p=p, seed=3).to(DEVICE).train()(ids)
    assert out.device.type == "cuda"
    rate = (out != ids).double().mean().item()
    assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("edges, nodes", [(HUB_AND_ISOLATED_EDGES, 9), (FULL_HUB_EDGES, 6)])
def test_sse_graph_on_cuda_follows_eq3(edges: list[list[int]], nodes: int) -> None:
    graph = NeighbourGraph.from_edges(edges, num_nodes=nodes)
    p, rho = 0.5, 6.0
    ids = torch.arange(nodes, device=DEVICE).repeat(DRAWS // nodes)
    out = F.sse_graph(ids, graph.to(DEVICE), p, rho, generator=_generator(11))
    tv = row_total_variation(empirical_transitions(ids.cpu(), out.cpu(), nodes), F.transition_matrix(graph, p, rho))
    assert float(tv.max()) < 0.01


def test_sse_graph_module_on_cuda_follows_its_transition_matrix() -> None:
    module = SSEGraph(NeighbourGraph.from_edges(HUB_AND_ISOLATED_EDGES, num_nodes=9), p=0.4, rho=3.0, seed=2)
    module = module.to(DEVICE).train()
    ids = torch.arange(9, device=DEVICE).repeat(DRAWS // 9)
    out = module(ids)
    assert out.device.type == "cuda"
    tv = row_total_variation(empirical_transitions(ids.cpu(), out.cpu(), 9), module.transition_matrix().cpu())
    assert float(tv.max()) < 0.01


def test_label_sse_on_cuda_keeps_shapes_and_swaps_at_rate_p() -> None:
    n, p = 500_000, 0.2
    labels = torch.randint(0, 50, (n,), device=DEVICE)
    out = LabelSSE(50, p=p, seed=4).to(DEVICE).train()(labels)
    assert out.shape == labels.shape and out.device.type == "cuda"
    rate = (out != labels).double().mean().item()
    assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_sse_at_p_zero_on_cuda_is_the_identity() -> None:
    ids = torch.randint(0, 100, (4096,), device=DEVICE)
    assert torch.equal(SSE(100, p=0.0, seed=0).to(DEVICE).train()(ids), ids)


@pytest.mark.parametrize("sparse", [False, True])
def test_md_lookup_on_cuda_equals_the_cpu_lookup_values_and_gradients(sparse: bool) -> None:
    torch.manual_seed(0)
    cpu = MixedDimensionEmbedding([40, 200, 1000], [16, 8, 4], 16, sparse=sparse)
    gpu = MixedDimensionEmbedding([40, 200, 1000], [16, 8, 4], 16, sparse=sparse)
    gpu.load_state_dict(cpu.state_dict())
    gpu = gpu.to(DEVICE)
    ids = torch.randint(0, 1240, (64, 5), generator=torch.Generator().manual_seed(1))
    weights = torch.randn(64, 5, 16, generator=torch.Generator().manual_seed(2))
    out_cpu, out_gpu = cpu(ids), gpu(ids.to(DEVICE))
    assert out_gpu.shape == (64, 5, 16)
    torch.testing.assert_close(out_gpu.cpu(), out_cpu, rtol=1e-5, atol=1e-6)
    (out_cpu * weights).sum().backward()
    (out_gpu * weights.to(DEVICE)).sum().backward()
    for (name, p_cpu), (_, p_gpu) in zip(cpu.named_parameters(), gpu.named_parameters()):
        g_cpu, g_gpu = p_cpu.grad, p_gpu.grad.cpu()
        assert g_gpu.is_sparse == g_cpu.is_sparse == (sparse and name == "flat_rows"), name
        if g_cpu.is_sparse:
            g_cpu, g_gpu = g_cpu.to_dense(), g_gpu.to_dense()
        torch.testing.assert_close(g_gpu, g_cpu, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("backend", ["auto", "off"])
def test_sse_module_on_cuda_follows_eq5_with_either_backend(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBREG_SSE_KERNEL", backend)
    num_ids, p = 8, 0.3
    ids = torch.arange(num_ids, device=DEVICE).repeat(DRAWS // num_ids)
    out = SSE(num_ids, p=p, seed=21).to(DEVICE).train()(ids)
    tv = row_total_variation(empirical_transitions(ids.cpu(), out.cpu(), num_ids), se_matrix(num_ids, p))
    assert float(tv.max()) < 0.01


def test_cuda_ids_take_the_triton_sampler_and_off_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    ids = torch.randint(0, 100, (64,), device=DEVICE)
    assert cuda_sampler(ids) is not None
    monkeypatch.setenv("EMBREG_SSE_KERNEL", "off")
    assert cuda_sampler(ids) is None


def test_the_triton_sampler_draws_without_a_host_sync() -> None:
    pytest.importorskip("triton")
    ids = torch.randint(1, 1000, (4096,), device=DEVICE)
    generator = _generator(1)
    label_sse = LabelSSE(1000, p=0.1, ignore_index=0, seed=1).to(DEVICE).train()
    label_sse.generator(DEVICE)
    F._sample_se(ids, 1000, 0.1, generator)  # compile outside the checked region
    label_sse.sample(ids)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        swapped = F._sample_se(ids, 1000, 0.1, generator)
        labels = label_sse.sample(ids)
        with pytest.raises(RuntimeError, match="synchroniz"):  # the mode does catch a sync: the range check's
            check_ids_range(ids, 1000)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert swapped.shape == labels.shape == ids.shape and swapped.device == labels.device == ids.device
    assert (swapped != ids).any() and (labels != ids).any()


def test_label_sse_with_a_padding_class_on_cuda_never_draws_it() -> None:
    labels = torch.arange(6, device=DEVICE).repeat(60_000)
    out = LabelSSE(6, p=1.0, ignore_index=0, seed=6).to(DEVICE).train()(labels)
    real = labels != 0
    assert torch.equal(out[~real], labels[~real])
    assert not (out[real] == 0).any() and not (out[real] == labels[real]).any()
    counts = torch.bincount(out[labels == 3].cpu(), minlength=6).double()
    expected = 60_000 / 4
    assert all(abs(counts[k] - expected) < 5 * math.sqrt(expected) for k in (1, 2, 4, 5))


def test_sse_resumes_its_cuda_stream_from_a_state_dict() -> None:
    ids = torch.randint(0, 500, (8192,), device=DEVICE)
    first = SSE(500, p=0.3, seed=5).to(DEVICE).train()
    first(ids)
    resumed = SSE(500, p=0.3, seed=99).to(DEVICE).train()
    resumed.load_state_dict(first.state_dict())
    assert torch.equal(resumed(ids), first(ids))

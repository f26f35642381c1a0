"""The fused C++ CPU kernel: its own invariants beyond the law tests that tests/sse runs on both backends."""

from __future__ import annotations

import pytest
import torch

import embreg.sse.functional as F
from embreg.errors import EmbregError
from embreg.sse import SSE, NeighbourGraph, _kernel
from tests.helpers.native_backends import require_kernel


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch):
    return require_kernel(monkeypatch, "EMBREG_SSE_KERNEL", _kernel.fused_kernel)


def test_output_does_not_depend_on_the_thread_count(kernel) -> None:
    ids = torch.randint(0, 500, (100_000,), generator=torch.Generator().manual_seed(0))  # several 16k chunks
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = kernel.sse_se(ids, 500, 0.1, torch.Generator().manual_seed(3))
        torch.set_num_threads(2)
        two = kernel.sse_se(ids, 500, 0.1, torch.Generator().manual_seed(3))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)


@pytest.mark.parametrize("p", [0.003, 0.3, 0.7, 1.0])
def test_swap_rate_over_many_chunks_matches_p(kernel, p: float) -> None:
    n = 400_000
    ids = torch.randint(0, 50, (n,), generator=torch.Generator().manual_seed(1))
    out = kernel.sse_se(ids, 50, p, torch.Generator().manual_seed(2))
    rate = (out != ids).double().mean().item()
    assert abs(rate - p) < 5 * (p * (1 - p) / n) ** 0.5 + 1e-12


def test_kernel_range_error_names_the_value(kernel) -> None:
    with pytest.raises(RuntimeError, match=r"found 7; valid range is \[0, 5\)"):
        kernel.sse_se(torch.tensor([1, 7, 2]), 5, 0.5, torch.Generator())


def test_kernel_messages_write_numbers_and_devices_as_pytorch_does(kernel) -> None:
    """The kernels build messages without iostreams (embreg_errors.h); the text stays what c10::str would write."""
    with pytest.raises(RuntimeError, match=r"^p must lie in \[0, 1\], got 1.5$"):
        kernel.sse_se(torch.tensor([1]), 5, 1.5, torch.Generator())
    with pytest.raises(RuntimeError, match=r"^rho must be >= 1, got 0.25$"):
        kernel.sse_graph(torch.tensor([1]), torch.tensor([0, 1, 2]), torch.tensor([1, 0]), 0.1, 0.25, None)
    with pytest.raises(RuntimeError, match=r"^num_embeddings must be >= 2, got -3$"):
        kernel.sse_se(torch.tensor([1]), -3, 0.5, torch.Generator())
    with pytest.raises(RuntimeError, match=r"ids must be on the CPU, got meta$"):
        kernel.sse_se(torch.tensor([1], device="meta"), 5, 0.5, torch.Generator())


def test_non_contiguous_input_keeps_shape_and_values(kernel) -> None:
    ids = torch.arange(60).view(6, 10).t()  # non-contiguous (10, 6)
    out = F.sse_se(ids, 60, 0.0)
    assert out is ids
    out = F.sse_se(ids, 60, 0.5, generator=torch.Generator().manual_seed(0))
    assert out.shape == ids.shape and out.dtype == ids.dtype
    kept = out == ids
    assert 0 < kept.sum() < ids.numel()


def test_module_uses_the_kernel_stream(kernel) -> None:
    ids = torch.randint(0, 100, (2048,), generator=torch.Generator().manual_seed(0))
    module = SSE(100, p=0.2, seed=11)
    expected = kernel.sse_se(ids, 100, 0.2, torch.Generator().manual_seed(11))
    assert torch.equal(module(ids), expected)


def test_graph_kernel_matches_its_module(kernel) -> None:
    graph = NeighbourGraph.from_edges([[0, 1], [1, 2], [2, 3]], num_nodes=6)
    ids = torch.randint(0, 6, (3000,), generator=torch.Generator().manual_seed(0))
    expected = kernel.sse_graph(ids, graph.indptr, graph.indices, 0.3, 5.0, torch.Generator().manual_seed(4))
    assert torch.equal(F.sse_graph(ids, graph, 0.3, 5.0, generator=torch.Generator().manual_seed(4)), expected)


def test_unknown_backend_mode_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBREG_SSE_KERNEL", "fast")
    with pytest.raises(EmbregError, match="EMBREG_SSE_KERNEL='fast' is not one of auto, off, on"):
        _kernel.fused_kernel()


def test_off_mode_uses_tensor_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBREG_SSE_KERNEL", "off")
    assert _kernel.fused_kernel() is None and _kernel.backend_name() == "torch"

"""The fused MD kernel built for narrower x86 instruction sets than the host's gives the tensor-op node's values
and gradients. The kernel's vectors are as wide as the target's registers (16 floats with AVX-512, 8 with AVX2,
4 with SSE) and its rows per pass follow from that, so each build has its own code paths; test_md_kernel.py
checks the host's build (``-march=native``), and on an AVX-512 machine only these builds reach the others.
"""

from __future__ import annotations

import platform
import warnings

import pytest
import torch

from embreg._native import NativeKernel
from embreg.embeddings import _kernel
from tests.helpers.md_kernel_cases import small_layer, values_and_grads

ISA_FLAGS = {"avx2": ["-mavx2", "-mfma", "-mno-avx512f"], "sse": ["-mno-avx", "-mno-avx2", "-mno-avx512f"]}


class _IsaKernel(NativeKernel):
    """The MD kernel compiled with ``ISA_FLAGS[isa]`` instead of ``-march=native`` (cached like any kernel)."""

    def __init__(self, isa: str) -> None:
        super().__init__(
            f"embreg_md_lookup_{isa}", _kernel._KERNEL.source, "EMBREG_MD_KERNEL", f"mixed-dimension lookup ({isa})"
        )
        self.isa = isa

    def flags(self) -> list[str]:
        return [*ISA_FLAGS[self.isa], "-fopenmp-simd", *super().flags()]


_BUILDS: dict[str, _IsaKernel] = {}


@pytest.fixture(params=sorted(ISA_FLAGS))
def isa_kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Makes the layer use the kernel built for one instruction set; skips off x86 or where it cannot be built."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("x86 instruction-set builds")
    monkeypatch.setenv("EMBREG_MD_KERNEL", "auto")
    kernel = _BUILDS.setdefault(request.param, _IsaKernel(request.param))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a failed build: skipped below, with its reason
        module = kernel.load()
    if module is None:  # pragma: no cover - depends on the machine's compiler
        pytest.skip(f"the {request.param} build failed: {kernel._failure}")
    monkeypatch.setattr(_kernel, "_KERNEL", kernel)
    return request.param


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dims", [(16, 9, 4, 1), (32, 20, 3), (64, 40, 17, 3), (128, 70, 9, 1), (12, 5, 2)])
def test_narrower_builds_match_the_tensor_op_lookup(isa_kernel: str, sparse: bool, dims: tuple[int, ...]) -> None:
    layer = small_layer(sparse, dims=dims)
    ids = torch.randint(0, 300, (37, 11), generator=torch.Generator().manual_seed(1))  # repeats within the batch
    dense_upstream = torch.randn(37, 11, dims[0], generator=torch.Generator().manual_seed(2))
    strided_upstream = torch.randn(dims[0], 11, 37, generator=torch.Generator().manual_seed(3)).permute(2, 1, 0)
    for upstream in (dense_upstream, strided_upstream, torch.ones(1).expand(37, 11, dims[0])):
        out, grads = values_and_grads(layer, ids, upstream, fused=True)
        ref_out, ref_grads = values_and_grads(layer, ids, upstream, fused=False)
        torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
        for g, w in zip(grads, ref_grads):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)

"""Fixtures shared by the mixed-dimension tests."""

from __future__ import annotations

import pytest

from tests.helpers.native_backends import select_backend


@pytest.fixture(params=["cpp", "torch"])
def md_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test once with the fused C++ lookup kernel and once with the tensor-op lookup (the C++ variant is
    skipped, with the build error as reason, on a machine that cannot compile it)."""
    from embreg.embeddings import _kernel

    return select_backend(request.param, monkeypatch, "EMBREG_MD_KERNEL", _kernel.fused_kernel)

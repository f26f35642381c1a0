"""Fixtures shared by the mixed-dimension tests."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["cpp", "torch"])
def md_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test once with the fused C++ lookup kernel and once with the tensor-op lookup.

    The C++ variant is skipped (with the build error as reason) on a machine that cannot compile it; the library
    then falls back to the tensor ops, which the other variant covers.
    """
    from embreg.embeddings import _kernel

    if request.param == "torch":
        monkeypatch.setenv("EMBREG_MD_KERNEL", "off")
        return "torch"
    monkeypatch.setenv("EMBREG_MD_KERNEL", "on")
    try:
        _kernel.fused_kernel()
    except Exception as error:  # pragma: no cover - depends on the machine's compiler
        pytest.skip(f"fused mixed-dimension kernel unavailable: {error}")
    return "cpp"

"""Fixtures shared by the SSE tests."""

from __future__ import annotations

import pytest

from embreg.sse import NeighbourGraph
from tests.helpers.native_backends import select_backend
from tests.helpers.sse_helpers import FULL_HUB_EDGES, HUB_AND_ISOLATED_EDGES


@pytest.fixture
def hub_and_isolated_graph() -> NeighbourGraph:
    return NeighbourGraph.from_edges(HUB_AND_ISOLATED_EDGES, num_nodes=9)


@pytest.fixture
def full_hub_graph() -> NeighbourGraph:
    return NeighbourGraph.from_edges(FULL_HUB_EDGES, num_nodes=6)


@pytest.fixture(autouse=True, params=["cpp", "torch"])
def sse_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs every SSE test once with the fused C++ kernel and once with the tensor-op samplers.

    The C++ variant is skipped (with the build error as reason) on a machine that cannot compile it;
    the library then falls back to the tensor ops, which the other variant covers.
    """
    from embreg.sse import _kernel

    return select_backend(request.param, monkeypatch, "EMBREG_SSE_KERNEL", _kernel.fused_kernel)

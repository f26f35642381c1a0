"""Fixtures shared by the SSE tests."""

from __future__ import annotations

import pytest

from _sse_helpers import FULL_HUB_EDGES, HUB_AND_ISOLATED_EDGES
from embreg.sse import NeighbourGraph


@pytest.fixture
def hub_and_isolated_graph() -> NeighbourGraph:
    return NeighbourGraph.from_edges(HUB_AND_ISOLATED_EDGES, num_nodes=9)


@pytest.fixture
def full_hub_graph() -> NeighbourGraph:
    return NeighbourGraph.from_edges(FULL_HUB_EDGES, num_nodes=6)


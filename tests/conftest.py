"""Shared fixtures: small synthetic rating data and an isolated EMBREG_HOME per test session; ``@pytest.mark.gpu``
tests run wherever CUDA is present and are skipped, with the reason, where it is not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="a `gpu` test: needs CUDA, and torch sees no CUDA device here")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _threads() -> None:
    torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture
def synthetic_ratings() -> dict[str, torch.Tensor]:
    """600 ratings from a planted rank-2 model over 30 users and 40 items, values in [1, 5]."""
    g = torch.Generator().manual_seed(0)
    users = torch.randint(0, 30, (600,), generator=g)
    items = torch.randint(0, 40, (600,), generator=g)
    u = torch.randn(30, 2, generator=g)
    v = torch.randn(40, 2, generator=g)
    ratings = (3 + (u[users] * v[items]).sum(-1)).clamp(1, 5)
    return {"user": users, "item": items, "rating": ratings}


def real_data_home() -> Path:
    """The cache directory the real-data tests read (the user's EMBREG_HOME or the default)."""
    return Path(os.environ.get("EMBREG_HOME", Path.home() / ".cache" / "embreg"))

"""Fixtures of the recipe tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def restore_threads():
    """Runs set torch's thread count from ``train.threads``; put it back afterwards."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)

"""Fixtures shared by the regulariser tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models and thousands of small autograd calls: extra threads only add synchronisation (on a busy 2-core
    machine two OpenMP threads make them ~40x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

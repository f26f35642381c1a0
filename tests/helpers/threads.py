"""``one_thread``: an autouse fixture for tests of tiny models (import it into a test module to use it)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models on one thread: on a busy 2-core machine, two OpenMP threads make them ~40x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

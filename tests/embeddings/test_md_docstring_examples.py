"""The runnable examples in the embreg.embeddings docstrings stay correct."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["bag", "blocking", "builder", "flat", "functional", "_kernel", "mixed_dimension", "sizing"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(f"embreg.embeddings.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0

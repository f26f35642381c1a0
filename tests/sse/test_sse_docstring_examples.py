"""The runnable examples in the embreg.sse docstrings stay correct."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["base", "embedding", "exclusion", "functional", "graph", "graph_transform", "label", "se"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(f"embreg.sse.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0

"""The runnable examples in the serving modules' and the beyond-accuracy metrics' docstrings."""

import doctest
import importlib

import pytest

MODULES = [
    "embreg.serving.vocabulary",
    "embreg.serving.vocabularies",
    "embreg.serving.loading",
    "embreg.serving.cli",
    "embreg.tasks.tagging.serving",
    "embreg.serving.run_checks",
    "embreg.runs.output_paths",
    "embreg.metrics.beyond_accuracy",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result

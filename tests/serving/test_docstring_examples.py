"""The runnable examples in the docstrings of the serving modules, the run files, the shared CLI types and the
beyond-accuracy metrics."""

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
    "embreg.serving.served_run",
    "embreg.serving.prediction",
    "embreg.serving.teachers",
    "embreg.serving.translate_command",
    "embreg.tasks.translation.serving",
    "embreg.cli_arguments",
    "embreg.runs.run_layout",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result

"""The runnable examples in the docstrings of the schedule, snapshot, ensemble and distillation modules."""

import doctest
import importlib

import pytest

MODULES = [
    "embreg.optim.schedules",
    "embreg.train.snapshots",
    "embreg.models.ensemble",
    "embreg.recipes.ensembles",
    "embreg.serving.ensemble",
    "embreg.regularizers.distillation",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result

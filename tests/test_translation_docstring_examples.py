"""The runnable examples in the docstrings of the translation family's modules."""

import doctest
import importlib

import pytest

MODULES = [
    "embreg.data.debian",
    "embreg.data.datasets.trans_de_en",
    "embreg.tasks.translation.parallel",
    "embreg.models.nmt_incremental",
    "embreg.models.transformer_nmt",
    "embreg.nn.decoding",
    "embreg.nn.decoding_steps",
    "embreg.tasks.translation.task",
    "embreg.tasks.translation.serving",
    "embreg.optim.inverse_sqrt",
    "embreg.tasks.translation.evaluation",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result

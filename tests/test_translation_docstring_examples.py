"""The runnable examples in the docstrings of the translation family's modules."""

import doctest
import importlib

import pytest

MODULES = [
    "embreg.data.debian",
    "embreg.data.trans_de_en",
    "embreg.data.parallel",
    "embreg.models.nmt_incremental",
    "embreg.models.transformer_nmt",
    "embreg.nn.decoding",
    "embreg.nn.decoding_steps",
    "embreg.recipes.tasks.translation",
    "embreg.serving.translating",
    "embreg.train.inverse_sqrt",
    "embreg.train.translation_eval",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result

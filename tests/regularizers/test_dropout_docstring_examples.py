"""The runnable examples in the docstrings of the dropout regularisers, their building blocks, model and data."""

import doctest
import importlib

import pytest

MODULES = [
    "embreg.nn._checks",
    "embreg.nn.dropout_control",
    "embreg.nn.dropout_sites",
    "embreg.nn.embedding_dropout",
    "embreg.nn.locked_dropout",
    "embreg.nn.tied_output",
    "embreg.nn.weight_drop",
    "embreg.regularizers.dropout.functional",
    "embreg.regularizers.dropout.objective",
    "embreg.regularizers.dropout.explicit",
    "embreg.regularizers.dropout.implicit",
    "embreg.regularizers.dropout.algorithms",
    "embreg.regularizers.dropout.sites",
    "embreg.models.lstm_lm",
    "embreg.models.lstm_sequence",
    "embreg.tasks.lm.batches",
    "embreg.tasks.lm.evaluation",
    "embreg.data.text_vocab",
    "embreg.data.text_corpus",
    "embreg.data.text_sources",
    "embreg.tasks.lm.task",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result

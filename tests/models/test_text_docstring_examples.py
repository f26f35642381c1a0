"""The runnable examples in the docstrings of the text classifiers, their attention block, penalty and heads."""

import doctest
import importlib

import pytest

MODULES = [
    "embreg.nn.attention.self_attentive",
    "embreg.regularizers.attention_penalty",
    "embreg.models.text_heads",
    "embreg.models.word_piece_swaps",
    "embreg.models.text_cnn",
    "embreg.models.bilstm_attention",
    "embreg.tasks.multitask.evaluation",
    "embreg.tasks.multitask.task",
    "embreg.data.labelled_text",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
    assert result.attempted > 0, f"{name} has no examples"

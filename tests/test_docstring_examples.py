"""The runnable examples in the docstrings of the registry, configuration, recipe, study and demo modules, and of
the next-item modules."""

import doctest
import importlib

import pytest

MODULES = [
    "embreg.registry",
    "embreg.papers",
    "embreg.progress",
    "embreg._native",
    "embreg.config",
    "embreg.embeddings.tables",
    "embreg.recipes",
    "embreg.recipes.recipe",
    "embreg.recipes.shipped",
    "embreg.recipes.resume_check",
    "embreg.recipes.context",
    "embreg.recipes.accepts",
    "embreg.recipes.no_ops",
    "embreg.tasks",
    "embreg.tasks.ratings.task",
    "embreg.tasks.ctr.task",
    "embreg.tasks.lm.task",
    "embreg.tasks.next_item.task",
    "embreg.tasks.mlm.task",
    "embreg.tasks.text.task",
    "embreg.tasks.data_files",
    "embreg.recipes.sweep",
    "embreg.models.pretrained",
    "embreg.data.mlm_masking",
    "embreg.data.datasets.mlm_texts",
    "embreg.models.encoder_mlm",
    "embreg.models.run_encoder",
    "embreg.tasks.mlm.evaluation",
    "embreg.data.sequences",
    "embreg.tasks.next_item.evaluation",
    "embreg.models.sasrec",
    "embreg.models.step_key",
    "embreg.recipes.run",
    "embreg.recipes.resume_check",
    "embreg.recipes.show",
    "embreg.studies.spec",
    "embreg.studies.runlog",
    "embreg.studies.kept",
    "embreg.studies.sections",
    "embreg.studies.report",
    "embreg.studies.hub",
    "embreg.demo",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result

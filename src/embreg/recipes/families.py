"""Recipe families: which schema loads a recipe and which runner trains it, chosen by the recipe's ``task`` key.

Every family offers the same three calls, so the command line and the benchmarks treat all recipes alike:

* ``load(name_or_path, overrides) -> config``
* ``run_single(config, out_dir, resume=...) -> FitResult``
* ``run_seeds(config, out_dir, seeds, resume=...) -> summary``

=============  ===========================================  ==========================================
family         ``task`` values                              schema / runner
=============  ===========================================  ==========================================
recommender    rating, ranking, ctr                         :mod:`embreg.recipes.schema` / ``run``
language-model lm                                           :mod:`embreg.recipes.lm_schema` / ``lm_run``
fine-tuning    classification, regression                   ``finetune_schema`` / ``finetune_run``
=============  ===========================================  ==========================================

Example:
    >>> family_for("lm-dropout").name, family_for("mf").name
    ('language-model', 'recommender')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embreg.config import load_yaml
from embreg.errors import ConfigError
from embreg.recipes.registry import recipe_path

__all__ = ["RecipeFamily", "FAMILIES", "family_for"]


@dataclass(frozen=True)
class RecipeFamily:
    """A schema and its runner (see the module docstring)."""

    name: str
    tasks: tuple[str, ...]
    load: Callable[[str | Path, Sequence[str]], Any]
    run_single: Callable[..., Any]
    run_seeds: Callable[..., dict]


def _recommender(tasks: tuple[str, ...]) -> RecipeFamily:
    from embreg.recipes.registry import load_recipe
    from embreg.recipes.run import run_seeds, run_single

    return RecipeFamily("recommender", tasks, load_recipe, run_single, run_seeds)


def _language_model(tasks: tuple[str, ...]) -> RecipeFamily:
    from embreg.recipes.lm_run import load_lm_recipe, run_lm_seeds, run_lm_single

    return RecipeFamily("language-model", tasks, load_lm_recipe, run_lm_single, run_lm_seeds)


def _finetuning(tasks: tuple[str, ...]) -> RecipeFamily:
    from embreg.recipes.finetune_run import load_finetune_recipe, run_finetune_seeds, run_finetune_single

    return RecipeFamily("fine-tuning", tasks, load_finetune_recipe, run_finetune_single, run_finetune_seeds)


FAMILIES: dict[str, tuple[tuple[str, ...], Callable[[tuple[str, ...]], RecipeFamily]]] = {
    "recommender": (("rating", "ranking", "ctr"), _recommender),
    "language-model": (("lm",), _language_model),
    "fine-tuning": (("classification", "regression"), _finetuning),
}
"""Family name -> (its ``task`` values, a builder); runners are imported lazily (fine-tuning pulls in transformers)."""


def family_for(name_or_path: str | Path) -> RecipeFamily:
    """The family of a shipped recipe name or a YAML path, from its ``task`` key (default ``rating``)."""
    task = load_yaml(recipe_path(name_or_path)).get("task", "rating")
    for tasks, build in FAMILIES.values():
        if task in tasks:
            return build(tasks)
    valid = [t for tasks, _ in FAMILIES.values() for t in tasks]
    raise ConfigError(f"recipe {str(name_or_path)!r} has task={task!r}; valid tasks: {', '.join(valid)}")

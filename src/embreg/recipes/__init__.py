"""Recipes: one grammar (:class:`Recipe`) for every family, shipped YAML recipes, the runner (task adapters:
:mod:`embreg.tasks`).

Example:
    >>> from embreg.recipes import load_recipe
    >>> load_recipe("ncf").model.name
    'ncf'
"""

from embreg.recipes.recipe import Recipe, TrainConfig
from embreg.recipes.shipped import list_recipes, load_recipe, recipe_from_mapping, recipe_path

__all__ = ["Recipe", "TrainConfig", "list_recipes", "load_recipe", "recipe_from_mapping", "recipe_path"]

"""Recipes: YAML files naming builders and their arguments, and the code that runs them."""

from embreg.recipes.registry import list_recipes, load_recipe, recipe_path
from embreg.recipes.schema import RecipeConfig

__all__ = ["RecipeConfig", "list_recipes", "load_recipe", "recipe_path"]

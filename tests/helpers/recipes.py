"""``base_recipe(model)``: the plainest shipped recipe of a registered model (the registry matrix and GPU tests)."""

from __future__ import annotations

from functools import cache
from typing import Any

from embreg.recipes import list_recipes, load_recipe


def techniques(recipe: Any) -> int:
    """How many techniques a recipe turns on (regularisers, transforms, a non-standard objective, MD tables)."""
    return (
        len(recipe.regularizers)
        + len(recipe.index_transforms)
        + (recipe.objective.name != "standard")
        + (recipe.embeddings.name != "uniform")
    )


@cache
def base_recipe(model: str) -> str | None:
    """The plainest shipped recipe of ``model`` (fewest techniques, then the first by name); ``None``: none."""
    candidates = []
    for name in list_recipes():
        recipe = load_recipe(name)
        if recipe.model.name == model:
            candidates.append((techniques(recipe), name))
    return min(candidates)[1] if candidates else None

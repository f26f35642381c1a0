"""The recipes shipped with embreg (YAML files in ``embreg/recipes/configs``) and how to load any recipe file.

Example:
    >>> recipe = load_recipe("mf", ["train.epochs=3"])
    >>> recipe.task, recipe.model.name, recipe.train.epochs
    ('rating', 'mf', 3)
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path

from embreg.config import apply_overrides, from_dict, load_yaml
from embreg.errors import ConfigError
from embreg.recipes.recipe import Recipe


def _config_dir() -> Path:
    return Path(str(resources.files("embreg.recipes") / "configs"))


def list_recipes() -> dict[str, str]:
    """Shipped recipe names mapped to their one-line descriptions."""
    out = {}
    for path in sorted(_config_dir().glob("*.yaml")):
        out[path.stem] = str(load_yaml(path).get("description", ""))
    return out


def recipe_path(name_or_path: str | Path) -> Path:
    """The YAML file of a shipped recipe name, or ``name_or_path`` itself when it is an existing file."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.exists():
            raise ConfigError(f"recipe file {path} does not exist")
        return path
    shipped = _config_dir() / f"{name_or_path}.yaml"
    if shipped.exists():
        return shipped
    names = sorted(list_recipes())
    close = difflib.get_close_matches(str(name_or_path), names, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown recipe {str(name_or_path)!r}.{hint} Shipped recipes: {', '.join(names)}")


def load_recipe(name_or_path: str | Path, overrides: Sequence[str] = ()) -> Recipe:
    """Loads a recipe by shipped name or YAML path and applies ``key=value`` overrides (``--set``).

    Raises:
        ConfigError: unknown recipe, malformed YAML, unknown or misspelt keys and names (with the closest valid
            one), values out of range, or a technique the model cannot take.
    """
    return recipe_from_mapping(apply_overrides(load_yaml(recipe_path(name_or_path)), list(overrides)))


def recipe_from_mapping(data: dict) -> Recipe:
    """A :class:`Recipe` from plain data (a parsed YAML file)."""
    return from_dict(Recipe, data)


def technique_count(recipe: Recipe) -> int:
    """How many techniques a recipe turns on (regularisers, index transforms, a non-standard objective, MD tables)."""
    return (
        len(recipe.regularizers)
        + len(recipe.index_transforms)
        + (recipe.objective.name != "standard")
        + (recipe.embeddings.name != "uniform")
    )


@cache
def plainest_recipe(model: str) -> str | None:
    """The plainest shipped recipe of a registered ``model``: fewest techniques, then the first by name.

    ``None`` when no shipped recipe uses the model. The registry test matrix, the GPU tests and the GPU step
    benchmark build each model family from it.

    Example:
        >>> plainest_recipe("mf")
        'mf'
    """
    candidates = []
    for name in list_recipes():
        recipe = load_recipe(name)
        if recipe.model is not None and recipe.model.name == model:
            candidates.append((technique_count(recipe), name))
    return min(candidates)[1] if candidates else None

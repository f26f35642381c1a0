"""The recipes shipped with embreg (YAML files in ``embreg/recipes/configs``) and how to load any recipe file.

Example:
    >>> recipe = load_recipe("mf", ["train.epochs=3"])
    >>> recipe.task, recipe.model.name, recipe.train.epochs
    ('rating', 'mf', 3)
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path

from embreg.config import apply_overrides, from_dict, load_yaml
from embreg.errors import ConfigError
from embreg.recipes.recipe import Recipe
from embreg.registry import REGISTRY
from embreg.tasks.data_files import file_section


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

    On a user's file (``data.path``) a shipped recipe's dataset settings and sizes that the overrides do not set
    give way to the file (:func:`recipe_mapping`).

    Raises:
        ConfigError: unknown recipe, malformed YAML, unknown or misspelt keys and names (with the closest valid
            one), values out of range, or a technique the model cannot take.
    """
    return recipe_from_mapping(recipe_mapping(name_or_path, overrides))


def recipe_mapping(name_or_path: str | Path, overrides: Sequence[str] = ()) -> dict:
    """The plain data of a recipe file with ``overrides`` applied: what :func:`load_recipe` builds.

    Who set a value decides what a user's file may change: in a shipped recipe, the data keys the overrides do
    not set are the recipe's, written for its own dataset; in a recipe file of the user's own, every key written
    is the user's (:func:`embreg.tasks.data_files.file_section`).

    Example:
        >>> recipe_mapping("ft-reviews", ["data.path=my.csv", "data.valid_size=50"])["data"]["fit_to_file"]
        ['train_size', 'test_size']
    """
    path = recipe_path(name_or_path)
    mapping = apply_overrides(load_yaml(path), list(overrides))
    shipped = path.resolve().parent == _config_dir().resolve()
    set_by_user = apply_overrides({}, list(overrides)).get("data")
    user_keys = set(set_by_user) if isinstance(set_by_user, dict) else set()
    return with_file_section(mapping, shipped=shipped, user_keys=user_keys)


def with_file_section(mapping: dict, *, shipped: bool = False, user_keys: Collection[str] = ()) -> dict:
    """``mapping`` with its ``data`` section as a user's file makes it
    (:func:`~embreg.tasks.data_files.file_section`); unchanged without ``data.path`` or when the task is
    unknown (the recipe reports that)."""
    data = mapping.get("data")
    try:
        config = REGISTRY.get("task", str(mapping.get("task", Recipe.task))).extra["data_config"]
    except ConfigError:
        return mapping
    if not isinstance(data, Mapping):
        return mapping
    return {**mapping, "data": file_section(data, config, shipped=shipped, user_keys=user_keys)}


def recipe_from_mapping(data: dict) -> Recipe:
    """A :class:`Recipe` from plain data (a parsed YAML file; every key in it counts as set by the user); a shipped
    recipe's description on a user's file names the file (:func:`describe_user_file`)."""
    recipe = from_dict(Recipe, with_file_section(data))
    describe_user_file(recipe)
    return recipe


@cache
def _shipped_descriptions() -> frozenset[str]:
    return frozenset(list_recipes().values())


def describe_user_file(recipe: Recipe) -> None:
    """Replaces a shipped recipe's description by one naming the user's file when ``data.path`` overrides its
    dataset (the shipped text names the recipe's own dataset). A description of the user's own is kept."""
    path = getattr(recipe.data, "path", None)
    if path is None or recipe.description not in _shipped_descriptions():
        return
    model = recipe.model.name if recipe.model is not None else "none"
    recipe.description = (
        f"{recipe.name} recipe (model {model}, task {recipe.task}) on the file {Path(path).name} (data.path)"
    )


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

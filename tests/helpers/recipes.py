"""``base_recipe(model)``: the plainest shipped recipe of a registered model (the registry matrix and GPU tests);
``set_args(overrides)``: the ``--set`` arguments of the command line for a list of overrides."""

from __future__ import annotations

from embreg.recipes.shipped import plainest_recipe as base_recipe

__all__ = ["base_recipe", "set_args"]


def set_args(overrides: list[str]) -> list[str]:
    """``["a=1", "b=2"]`` -> ``["--set", "a=1", "--set", "b=2"]``."""
    return [x for s in overrides for x in ("--set", s)]

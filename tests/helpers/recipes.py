"""``base_recipe(model)``: the plainest shipped recipe of a registered model (the registry matrix and GPU tests)."""

from __future__ import annotations

from embreg.recipes.shipped import plainest_recipe as base_recipe

__all__ = ["base_recipe"]

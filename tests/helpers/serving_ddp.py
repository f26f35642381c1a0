"""Module-level workers (spawned ranks import them) for the serving tests of runs trained data-parallel."""

from __future__ import annotations

from typing import Any


def train_tiny(out: str, recipe: str, overrides: list[str]) -> dict[str, Any]:
    """One run of ``recipe`` on this rank (every rank writes to ``out``: rank 0 alone writes files); its metrics."""
    from embreg.recipes import load_recipe
    from embreg.recipes.run import run_single

    return dict(run_single(load_recipe(recipe, overrides), out).metrics)

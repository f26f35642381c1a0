"""Recipe families: every shipped recipe is loaded by its family's schema; unknown tasks are a clear error."""

from __future__ import annotations

import pytest

from embreg.errors import ConfigError
from embreg.recipes import list_recipes
from embreg.recipes.families import FAMILIES, family_for


def test_every_shipped_recipe_loads_through_its_family() -> None:
    seen = set()
    for name in list_recipes():
        family = family_for(name)
        cfg = family.load(name, [])
        assert cfg.name == name
        seen.add(family.name)
    assert seen == set(FAMILIES)


def test_task_values_pick_the_family(tmp_path) -> None:
    expected = {"rating": "recommender", "ranking": "recommender", "ctr": "recommender", "lm": "language-model",
                "classification": "fine-tuning", "regression": "fine-tuning"}
    for task, family in expected.items():
        path = tmp_path / f"{task}.yaml"
        path.write_text(f"name: x\ntask: {task}\n")
        assert family_for(path).name == family


def test_unknown_task_names_the_valid_ones(tmp_path) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text("name: odd\ntask: translation\n")
    with pytest.raises(ConfigError, match=r"task='translation'; valid tasks: rating, ranking, ctr, lm"):
        family_for(path)

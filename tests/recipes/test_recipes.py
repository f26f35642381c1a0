"""Recipe loading, strict configs and overrides (no data needed)."""

import pytest

from embreg.errors import ConfigError
from embreg.recipes import list_recipes, load_recipe

PAPER_RECIPES = ["mf", "mf-dropout", "mf-sse-se", "mf-sse-graph", "bpr", "bpr-dropout", "bpr-sse-se", "bpr-sse-graph"]


def test_every_paper_recipe_is_shipped_and_loads():
    shipped = list_recipes()
    for name in PAPER_RECIPES:
        assert name in shipped and shipped[name], name
        cfg = load_recipe(name)
        assert cfg.name == name
        assert cfg.search, f"{name} has no tuning search space"


def test_variants_share_the_base_search_space():
    for family in ("mf", "bpr"):
        base = set(load_recipe(family).search)
        for suffix in ("-dropout", "-sse-se", "-sse-graph"):
            assert base <= set(load_recipe(family + suffix).search)


def test_override_changes_value_and_misspelt_key_suggests():
    assert load_recipe("mf", ["train.lr=0.01", "sse.kind=se"]).train.lr == 0.01
    with pytest.raises(ConfigError, match="did you mean 'train.lr'"):
        load_recipe("mf", ["train.lrr=0.01"])


def test_unknown_recipe_suggests_closest():
    with pytest.raises(ConfigError, match="mf-sse-se"):
        load_recipe("mf-sse-see")


@pytest.mark.parametrize("override", ["sse.p_item=1.5", "sse.rho_item=0.5", "model.dropout=1.0", "train.lr=0",
                                      "data.split=[0.5,0.5]", "model.name=bpr", "sse.kind=graphs"])
def test_bad_values_are_config_errors(override):
    with pytest.raises(ConfigError):
        load_recipe("mf", [override])


def test_recipe_file_path(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ntask: rating\nmodel: {dim: 8}\n")
    cfg = load_recipe(str(path))
    assert cfg.model.dim == 8 and cfg.name == "mine"

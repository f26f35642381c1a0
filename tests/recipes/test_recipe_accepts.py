"""Settings that matter only in some combinations are refused in the others, when the recipe is loaded."""

from __future__ import annotations

import pytest

from embreg.errors import ConfigError
from embreg.recipes import load_recipe


@pytest.mark.parametrize("recipe", ["mf", "ncf", "bpr", "ctr-adult"])
def test_init_std_with_xavier_initialisation_is_refused(recipe: str) -> None:
    with pytest.raises(ConfigError, match=r"model.init_std=0.5: model '\w+' uses init_std only with init: normal"):
        load_recipe(recipe, ["model.init=xavier_uniform", "model.init_std=0.5"])
    xavier = load_recipe(recipe, ["model.init=xavier_uniform", "model.init_std=0.1"])  # 0.1: the default
    assert xavier.model.init == "xavier_uniform"
    assert load_recipe(recipe, ["model.init_std=0.5"]).model.init_std == 0.5


def test_a_warm_up_without_a_schedule_that_warms_up_is_refused() -> None:
    with pytest.raises(
        ConfigError, match=r"train.warmup=0.1 .* read by train.schedule=linear\|cosine\|one-cycle\|inverse-sqrt only"
    ):
        load_recipe("mf", ["train.warmup=0.1"])
    with pytest.raises(ConfigError, match="train.schedule='constant' would ignore it"):
        load_recipe("ft-reviews", ["train.schedule=constant"])
    assert load_recipe("ft-reviews", ["train.schedule=constant", "train.warmup=0"]).train.warmup == 0


def test_a_non_default_embeddings_section_is_refused_where_the_model_builds_its_own_tables() -> None:
    from embreg.recipes.accepts import check_tables_reached

    recipe = load_recipe("lm-none", ["embeddings={name: uniform, sparse: true}"])
    with pytest.raises(ConfigError, match="embeddings.sparse=true: model 'lstm-lm' builds its own embedding tables"):
        check_tables_reached(recipe, "lstm-lm", tables_built=0)
    check_tables_reached(recipe, "lstm-lm", tables_built=1)
    check_tables_reached(load_recipe("lm-none"), "lstm-lm", tables_built=0)


@pytest.mark.parametrize(
    "recipe, setting, readers",
    [
        ("mf", "train.num_negatives=4", "ranking"),
        ("sasrec", "train.num_negatives=4", "ranking"),
        ("bpr", "train.eval_train=true", "rating"),
        ("lm-none", "train.eval_train=true", "rating"),
    ],
)
def test_a_task_specific_train_field_the_task_ignores_is_refused(recipe, setting, readers):
    key = setting.split("=")[0]
    with pytest.raises(ConfigError, match=rf"{key}=.* is not used by task '[\w-]+', only by {readers}; remove it"):
        load_recipe(recipe, [setting])


def test_the_tasks_that_read_a_task_specific_train_field_take_it():
    assert load_recipe("bpr", ["train.num_negatives=4"]).train.num_negatives == 4
    assert load_recipe("mf", ["train.eval_train=true"]).train.eval_train is True

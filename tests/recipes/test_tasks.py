"""Tasks: every shipped recipe loads through its task adapter; a task fixes data schema, defaults and monitor."""

from __future__ import annotations

import pytest

from embreg.errors import ConfigError
from embreg.recipes import list_recipes, load_recipe
from embreg.recipes.recipe import ID_KINDS
from embreg.registry import REGISTRY

# what a minimal file needs beside ``task`` (regression needs real-valued labels)
MINIMAL = {
    "rating": "",
    "ranking": "",
    "ctr": "",
    "lm": "",
    "next-item": "model: {name: sasrec, user_dim: 8}\n",  # with user ids (SSE-PT)
    "classification": "",
    "regression": "data: {task: regression}\n",
    "tagging": "",
    "mlm": "",
    "translation": "",
}
MONITORS = {
    "rating": ("val_rmse", "min"),
    "ranking": ("val_ndcg@10", "max"),
    "ctr": ("val_logloss", "min"),
    "lm": ("val_ppl", "min"),
    "next-item": ("val_ndcg@10", "max"),
    "classification": ("val_mcc", "max"),
    "regression": ("val_corr", "max"),
    "tagging": ("val_f1", "max"),
    "mlm": ("val_ppl", "min"),
    "translation": ("val_bleu", "max"),
}


def test_every_registered_task_is_covered_here() -> None:
    assert set(REGISTRY.names("task")) == set(MINIMAL) == set(MONITORS)


def test_every_shipped_recipe_loads_through_its_task() -> None:
    seen = set()
    for name in list_recipes():
        recipe = load_recipe(name, [])
        assert recipe.name == name
        adapter = REGISTRY.get("task", recipe.task).extra["adapter"]
        assert recipe.adapter is adapter and isinstance(recipe.data, adapter.data_config), name
        assert recipe.task in recipe.model.entry.extra["tasks"], name
        seen.add(recipe.task)
    assert seen == {"rating", "ranking", "next-item", "ctr", "lm", "classification", "tagging", "mlm", "translation"}


@pytest.mark.parametrize("task", sorted(MINIMAL))
def test_task_values_pick_the_adapter_its_defaults_and_its_monitor(tmp_path, task) -> None:
    path = tmp_path / f"{task}.yaml"
    path.write_text(f"name: x\ntask: {task}\n{MINIMAL[task]}")
    recipe = load_recipe(path)
    adapter = recipe.adapter
    assert adapter.name == task and isinstance(recipe.data, adapter.data_config)
    assert recipe.model.name == adapter.default_model
    for key, value in adapter.train_defaults.items():
        assert getattr(recipe.train, key) == value, (task, key)
    assert recipe.monitor == MONITORS[task]
    # a train key the file sets wins over the task's default, the others stay
    path.write_text(f"name: x\ntask: {task}\n{MINIMAL[task]}train: {{epochs: 2}}\n")
    recipe = load_recipe(path)
    assert recipe.train.epochs == 2 and recipe.train.lr == adapter.train_defaults["lr"]


def test_the_family_defaults_differ_where_the_papers_do() -> None:
    lm = load_recipe("lm-dropout", ["train={}"]).train
    assert (lm.optimizer, lm.lr, lm.clip_norm, lm.patience) == ("sgd", 30.0, 0.35, None)
    ft = load_recipe("ft-reviews", ["train={}"]).train
    assert (ft.optimizer, ft.schedule, ft.warmup, ft.keep_checkpoints) == ("adamw", "linear", 0.1, "best")
    rating = load_recipe("mf", ["train={}"]).train
    assert (rating.optimizer, rating.schedule, rating.patience) == ("adam", "constant", 5)


def test_unknown_task_names_the_valid_ones(tmp_path) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text("name: odd\ntask: transliteration\n")
    with pytest.raises(
        ConfigError,
        match=r"unknown task 'transliteration'.*Registered: classification, ctr, lm, mlm, "
        r"next-item, ranking, rating, regression, tagging, translation",
    ):
        load_recipe(path)


def test_the_data_section_is_the_tasks_own(tmp_path) -> None:
    with pytest.raises(ConfigError, match="unknown config key 'data.bptt'"):
        load_recipe("mf", ["data.bptt=10"])
    with pytest.raises(ConfigError, match="unknown config key 'data.max_rows'"):
        load_recipe("lm-dropout", ["data.max_rows=10"])
    assert load_recipe("lm-dropout", ["data.bptt=10"]).data.bptt == 10


@pytest.mark.parametrize("task", sorted(MINIMAL))
def test_index_transforms_only_on_the_tasks_id_kinds(tmp_path, task) -> None:
    adapter = REGISTRY.get("task", task).extra["adapter"]
    assert REGISTRY.get("task", task).provides == tuple(f"ids:{kind}" for kind in adapter.id_kinds)
    for kind in ID_KINDS:
        path = tmp_path / f"{task}-{kind}.yaml"
        name = "label-sse" if kind == "label" else "sse-se"
        path.write_text(f"name: x\ntask: {task}\n{MINIMAL[task]}index_transforms: {{{kind}: {{name: {name}}}}}\n")
        if kind in adapter.id_kinds:
            assert load_recipe(path).index_transforms[kind].name == name
        else:
            with pytest.raises(ConfigError, match=f"index_transforms.{kind}: task '{task}' has no '{kind}' ids"):
                load_recipe(path)


def test_monitor_metric_overrides_the_tasks_choice() -> None:
    assert load_recipe("mf", ["monitor_metric=val_mae"]).monitor == ("val_mae", "min")
    assert load_recipe("bpr", ["monitor_metric=val_recall@10"]).monitor == ("val_recall@10", "max")
    with pytest.raises(ConfigError, match="must name a validation metric"):
        load_recipe("mf", ["monitor_metric=test_rmse"])

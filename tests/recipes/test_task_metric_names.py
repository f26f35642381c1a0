"""Every task declares the metric keys its runs report (``adapter.metric_names``), checked against real runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from embreg.recipes import load_recipe
from embreg.recipes.run import run_single
from embreg.recipes.shipped import list_recipes
from embreg.tasks import RUN_METRICS


def _one_recipe_per_task() -> dict[str, str]:
    """The shortest-named (plainest) shipped recipe of every task the shipped recipes use."""
    chosen: dict[str, str] = {}
    for name in sorted(list_recipes(), key=lambda n: (len(n), n)):
        chosen.setdefault(load_recipe(name).task, name)
    return chosen


TASKS = _one_recipe_per_task()


@pytest.mark.parametrize(("task", "recipe_name"), sorted(TASKS.items()))
def test_a_tiny_run_reports_only_declared_metrics(task: str, recipe_name: str, tmp_path: Path) -> None:
    recipe = load_recipe(recipe_name)
    overrides = [*recipe.adapter.smoke_overrides, "train.device=cpu", "train.threads=1"]
    if "pretrained" in recipe.model.entry.provides:  # a tiny local checkpoint instead of MiniLM
        pytest.importorskip("transformers")
        from tests.helpers.finetune_tiny import tiny_checkpoint

        overrides.append(f"model.pretrained={tiny_checkpoint(tmp_path / 'bert', mask=task == 'mlm')}")
    recipe = load_recipe(recipe_name, overrides)
    declared = set(recipe.adapter.metric_names(recipe))
    reported = set(run_single(recipe, None).metrics)
    assert reported - declared == set(), f"{recipe_name} ({task}) reports undeclared metrics"
    assert {recipe.monitor[0], *recipe.adapter.headline_metrics()} & reported, "no headline metric is reported"
    assert recipe.monitor[0] in declared
    # a declared key a run lacks must be one that depends on the run's circumstances, not a misspelling
    assert declared - reported <= {"world_size"} | _label_dependent(task)


def _label_dependent(task: str) -> set[str]:
    """Classification reports F1 for two classes and macro-F1 for more; a file may hold either."""
    if task != "classification":
        return set()
    return {f"{prefix}_{name}" for prefix in ("val", "test", "train", "gap") for name in ("f1", "macro_f1")}


def test_metric_names_follow_the_recipe() -> None:
    five_classes = load_recipe("ft-reviews", ["data.task=rating"])
    assert "test_macro_f1" in five_classes.adapter.metric_names(five_classes)
    assert "test_f1" not in five_classes.adapter.metric_names(five_classes)
    ranking = load_recipe("bpr")
    names = ranking.adapter.metric_names(ranking)
    assert {"test_precision@1", "test_recall@5", "test_ndcg@10", "val_hit@10"} <= set(names)
    assert set(RUN_METRICS) <= set(names)

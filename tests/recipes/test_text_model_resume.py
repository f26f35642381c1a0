"""A text CNN run (multi-task, two heads) resumed from its checkpoint ends as the uninterrupted run."""

from __future__ import annotations

import json

import pytest

from embreg.recipes import load_recipe
from embreg.recipes.run import run_single

TINY = [
    "model={name: text-cnn, init_embeddings: random, embedding_dim: 8, num_filters: 3}",
    "data.train_size=24",
    "data.valid_size=8",
    "data.test_size=8",
    "data.max_length=16",
    "data.loss_weights=[1.0, 0.5]",
    "train.batch_size=8",
    "train.progress=false",
    "train.device=cpu",
    "train.schedule=constant",
    "train.warmup=0",
    "train.keep_checkpoints=all",
]


@pytest.mark.integration
def test_a_resumed_multi_task_run_equals_the_uninterrupted_one(tmp_path) -> None:
    whole = run_single(load_recipe("ft-reviews-multitask", [*TINY, "train.epochs=2"]), tmp_path / "whole").metrics
    run_single(load_recipe("ft-reviews-multitask", [*TINY, "train.epochs=1"]), tmp_path / "part")
    resumed = run_single(
        load_recipe("ft-reviews-multitask", [*TINY, "train.epochs=2"]), tmp_path / "part", resume=True
    ).metrics
    same = [k for k in whole if k.startswith(("val_", "test_", "train_")) and k != "train_seconds" or k == "best_epoch"]
    assert {k: resumed[k] for k in same} == {k: whole[k] for k in same}
    history = [json.loads(line) for line in (tmp_path / "part" / "history.jsonl").read_text().splitlines()]
    assert [record["epoch"] for record in history] == [0, 1]

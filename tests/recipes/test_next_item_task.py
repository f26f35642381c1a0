"""Task ``next-item``: a user's own timed file, training examples, negatives per position, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from embreg.errors import ConfigError, DataError
from embreg.recipes import load_recipe
from embreg.recipes.run import run_single
from embreg.tasks.next_item.task import expand_last, training_examples

FAST = ["train.epochs=1", "train.progress=false", "data.max_len=8", "model.dim=8", "data.eval_negatives=5"]


def _write(path, rows, header="user,item,ts"):
    path.write_text(header + "\n" + "\n".join(",".join(str(v) for v in row) for row in rows) + "\n")
    return path


@pytest.fixture
def timed_file(tmp_path):
    rng = np.random.default_rng(0)
    rows = [(f"u{u}", f"i{rng.integers(0, 30)}", 1000 + t) for u in range(12) for t in range(int(rng.integers(3, 9)))]
    rows.append(("lonely", "i1", 5))  # one interaction: dropped and counted
    return _write(tmp_path / "timed.csv", rows)


def _user_file_recipe(name, path, *extra):
    sets = [f"data.path={path}", "data.user_col=user", "data.item_col=item", "data.timestamp_col=ts"]
    return load_recipe(name, sets + FAST + list(extra))


@pytest.mark.parametrize("name", ["sasrec", "sasrec-sse", "sse-pt", "sasrec-recbole"])
def test_recipes_run_on_a_users_timed_file(name, timed_file, tmp_path):
    recipe = _user_file_recipe(name, timed_file)
    metrics = run_single(recipe, tmp_path / "run").metrics
    for key in ("test_ndcg@10", "test_hit@10", "test_mrr", "test_sampled_ndcg@10", "test_sampled_hit@10"):
        assert 0.0 <= metrics[key] <= 1.0, key
    split = json.loads((tmp_path / "run" / "split.json").read_text())
    assert split["dropped_users"] == 1
    assert split["max_len"] == 8


def test_missing_timestamp_column_is_a_clear_error(timed_file):
    recipe = load_recipe("sasrec", [f"data.path={timed_file}", "data.user_col=user", "data.item_col=item"] + FAST)
    with pytest.raises(ConfigError, match="timestamp_col"):
        recipe.adapter.prepare(recipe)
    recipe = _user_file_recipe("sasrec", timed_file, "data.timestamp_col=when")
    with pytest.raises(DataError, match="when"):
        recipe.adapter.prepare(recipe)


def test_non_numeric_timestamps_are_a_clear_error(tmp_path):
    path = _write(tmp_path / "bad.csv", [("a", "x", "monday"), ("a", "y", 2), ("a", "z", 3)])
    recipe = _user_file_recipe("sasrec", path)
    with pytest.raises(DataError, match="timestamp"):
        recipe.adapter.prepare(recipe)


def test_bad_data_settings_are_refused():
    with pytest.raises(ConfigError, match="min_interactions"):
        load_recipe("sasrec", ["data.min_interactions=2"])
    with pytest.raises(ConfigError, match="max_len"):
        load_recipe("sasrec", ["data.max_len=0"])
    with pytest.raises(ConfigError, match="user_dim"):
        load_recipe("sasrec", ["index_transforms.user={name: sse-se, p: 0.1}"])


def test_training_examples_and_negatives(timed_file):
    recipe = _user_file_recipe("sasrec", timed_file)
    prepared = recipe.adapter.prepare(recipe)
    split = prepared.split
    pad = split.num_items
    examples = training_examples(split, 8, "sequences")
    for user, inp, target in zip(examples["user"].tolist(), examples["input"], examples["target"]):
        seq = split.train[list(split.users).index(user)]
        real = target != pad
        assert target[real].tolist() == seq[1:][-int(real.sum()) :].tolist()
        assert inp[-1].item() == seq[-2]  # input shifted by one against the target
    prefixes = training_examples(split, 8, "prefixes")
    assert len(prefixes["last"]) == sum(len(seq) - 1 for seq in split.train)
    assert expand_last(torch.tensor([3]), 4, pad).tolist() == [[pad, pad, pad, 3]]
    batches = recipe.adapter.batches(recipe, prepared)
    batch = next(iter(batches.epoch(0)))
    seen = {int(u): set(split.train[i].tolist()) for i, u in enumerate(split.users)}
    target, neg = batch["target"], batch["neg"]
    assert torch.equal(neg == pad, target == pad)
    for user, row in zip(batch["user"].tolist(), neg):
        assert not {int(i) for i in row[row != pad]} & seen[user]

"""Recipes on a user's file: the run names the file it used (path, sha256, rows), never the dataset it replaced;
duplicates, tiny files and small labelled files are clear one-line errors."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import yaml

from embreg.cli import main
from embreg.data.cache import sha256_file
from embreg.errors import ConfigError, DataError
from embreg.recipes import load_recipe
from embreg.recipes.run import run_single
from embreg.tasks.text.task import load_text_task

QUICK = ["train.epochs=1", "train.progress=false", "model.dim=8"]


def _ratings(path, rows):
    path.write_text("user_id,item_id,rating\n" + "".join(f"{u},{i},{r}\n" for u, i, r in rows))
    return path


def _unique_rows(n=400, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.choice(30 * 40, size=n, replace=False)
    return [(int(p // 40), int(p % 40), int(rng.integers(1, 6))) for p in pairs]


def test_a_user_file_run_names_the_file_and_its_sha256_not_the_dataset(tmp_path):
    rows = _unique_rows()
    path = _ratings(tmp_path / "mine.csv", rows + [rows[0], rows[5]])  # two duplicates, resolved by mean
    digest = sha256_file(path)
    recipe = load_recipe("mf", QUICK + [f"data.path={tmp_path}/./mine.csv", "data.duplicates=mean"])
    run_single(recipe, tmp_path / "run")
    report = (tmp_path / "run" / "report.md").read_text()
    config_text = (tmp_path / "run" / "config.yaml").read_text()
    split = json.loads((tmp_path / "run" / "split.json").read_text())
    for text in (report, config_text, json.dumps(split)):
        assert str(path.resolve()) in text and digest in text
        assert "MovieLens" not in text and "ml-100k" not in text
    data = yaml.safe_load(config_text)["data"]
    assert data["dataset"] == "file" and data["path"] == str(path.resolve()) and data["sha256"] == digest
    assert split["data"] == {
        "path": str(path.resolve()),
        "bytes": path.stat().st_size,
        "sha256": digest,
        "rows_read": 402,
        "duplicates_removed": 2,
        "duplicates": "mean",
        "rows": 400,
    }
    assert "402 rows read, 2 duplicate rows resolved by `mean`, 400 rows used" in report
    assert "on the file mine.csv" in report


def test_a_dataset_run_reports_its_dataset(tmp_path):
    recipe = load_recipe("mf", QUICK + ["data.max_rows=2000"])
    run_single(recipe, tmp_path / "run")
    split = json.loads((tmp_path / "run" / "split.json").read_text())
    assert split["data"] == {"dataset": "ml-100k", "rows_read": 100000, "rows": 2000}
    assert "data: dataset `ml-100k`: 100000 rows read, 2000 rows used" in (tmp_path / "run" / "report.md").read_text()


def test_the_recipe_names_the_file_where_data_path_overrides_its_dataset(tmp_path):
    path = _ratings(tmp_path / "mine.csv", _unique_rows(20))
    recipe = load_recipe("bpr", [f"data.path={path}"])
    assert recipe.data.dataset == "file" and recipe.data.sha256 == sha256_file(path)
    assert "MovieLens" not in recipe.description and "mine.csv" in recipe.description
    own = tmp_path / "own.yaml"
    own.write_text(f"name: own\ndescription: my BPR on my clicks\ntask: ranking\ndata: {{path: {path}}}\n")
    assert load_recipe(own).description == "my BPR on my clicks"
    assert load_recipe("bpr").data.dataset == "ml-100k" and load_recipe("bpr").data.sha256 is None


def test_a_changed_file_is_refused_against_its_recorded_sha256(tmp_path):
    path = _ratings(tmp_path / "mine.csv", _unique_rows(50))
    recipe = load_recipe("mf", QUICK + [f"data.path={path}"])
    _ratings(path, _unique_rows(50, seed=1))
    with pytest.raises(DataError, match="has sha256 .*, not data.sha256=.*the file changed"):
        recipe.adapter.prepare(recipe)
    with pytest.raises(ConfigError, match="data.sha256='abc' must be 64 hexadecimal digits"):
        load_recipe("mf", [f"data.path={path}", "data.sha256=abc"])
    with pytest.raises(ConfigError, match="data.dataset='file' needs data.path"):
        load_recipe("mf", ["data.dataset=file"])


def test_duplicates_in_a_recipe_are_refused_by_default_and_resolved_before_the_split(tmp_path):
    rows = _unique_rows(200)
    path = _ratings(tmp_path / "mine.csv", rows + rows[:30])
    recipe = load_recipe("bpr", QUICK + [f"data.path={path}"])
    with pytest.raises(DataError, match=r"30 duplicate \(user, item\) rows.*at lines 2, 202"):
        recipe.adapter.prepare(recipe)
    recipe = load_recipe("bpr", QUICK + [f"data.path={path}", "data.duplicates=first"])
    prepared = recipe.adapter.prepare(recipe)
    pairs = prepared.ratings.users * prepared.ratings.num_items + prepared.ratings.items
    train, test = set(pairs[prepared.split["train"]]), set(pairs[prepared.split["test"]])
    assert len(prepared.ratings) == 200 and not train & test
    with pytest.raises(ConfigError, match="data.duplicates='mean' averages ratings, but data.rating_col is null"):
        load_recipe("bpr", [f"data.path={path}", "data.rating_col=null", "data.duplicates=mean"])


def test_next_item_duplicates_are_refused_and_resolved(tmp_path):
    rows = [(f"u{u}", f"i{(u + t) % 9}", 100 + t) for u in range(6) for t in range(5)]
    path = tmp_path / "timed.csv"
    path.write_text("user,item,ts\n" + "".join(f"{u},{i},{t}\n" for u, i, t in rows + rows[:2]))
    sets = [
        f"data.path={path}",
        "data.user_col=user",
        "data.item_col=item",
        "data.timestamp_col=ts",
        "data.eval_negatives=3",
    ]
    recipe = load_recipe("sasrec", sets)
    with pytest.raises(DataError, match=r"2 duplicate \(user, item, timestamp\) rows.*to first or last$"):
        recipe.adapter.prepare(recipe)
    resolved = load_recipe("sasrec", sets + ["data.duplicates=last"])
    prepared = resolved.adapter.prepare(resolved)
    assert prepared.source["rows"] == 30 and prepared.source["duplicates_removed"] == 2
    with pytest.raises(ConfigError, match="data.duplicates"):
        load_recipe("sasrec", sets + ["data.duplicates=mean"])


@pytest.mark.parametrize("rows", [1, 2, 3])
@pytest.mark.parametrize("recipe", ["mf", "bpr", "sasrec", "ctr-adult"])
def test_one_to_three_row_files_are_one_line_errors(tmp_path, capsys, rows, recipe):
    path = tmp_path / "tiny.csv"
    if recipe == "ctr-adult":
        path.write_text("label,site\n" + "".join(f"{i % 2},s{i}\n" for i in range(rows)))
    else:
        path.write_text("user_id,item_id,rating,ts\n" + "".join(f"1,{i},4,{i}\n" for i in range(rows)))
    sets = [f"data.path={path}", "train.epochs=1", "train.progress=false"]
    if recipe == "sasrec":
        sets.append("data.timestamp_col=ts")
    code = main(["run", recipe, "--out", str(tmp_path / "run")] + [x for s in sets for x in ("--set", s)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("embreg: error: ") and "\n" not in err
    assert "tiny.csv" in err and re.search(r"needs? at least", err), err


def _labelled(path, n):
    path.write_text("text,label\n" + "".join(f"text number {i},{i % 2}\n" for i in range(n)))
    return path


def test_a_small_labelled_file_names_the_set_that_fits(tmp_path):
    path = _labelled(tmp_path / "small.csv", 50)
    recipe = load_recipe("ft-polarity", [f"data.path={path}", "data.train_size=1000"])  # 1000 of 50 rows
    with pytest.raises(ConfigError, match=r"--set data.train_size=40 fits this file \(or data.train_size=null"):
        load_text_task(recipe)
    task = load_text_task(load_recipe("ft-polarity", [f"data.path={path}", "data.train_size=40"]))
    assert task.sizes == {"train": 40, "valid": 5, "test": 5}
    sizes = [f"data.path={path}", "data.train_size=1000", "data.valid_size=30", "data.test_size=30"]
    explicit = load_recipe("ft-polarity", sizes)
    with pytest.raises(ConfigError, match="--set data.valid_size=5 --set data.test_size=5 --set data.train_size=40"):
        load_text_task(explicit)


def _three_labels(path, n=60):
    path.write_text("text,label\n" + "".join(f"text number {i},{('neg', 'neu', 'pos')[i % 3]}\n" for i in range(n)))
    return path


def test_three_labels_under_a_binary_task_are_refused_naming_the_labels(tmp_path, capsys):
    """config.yaml must say what the run trains: data.task=binary with a 3-class file is a one-line error."""
    path = _three_labels(tmp_path / "three.csv")
    args = ["run", "ft-polarity", "--set", f"data.path={path}", "--set", "train.progress=false"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("embreg: error: data.task='binary' needs two classes, but "), err
    assert "has 3 labels: neg, neu, pos; set data.task=multiclass" in err
    assert not (tmp_path / "run" / "config.yaml").exists()
    task = load_text_task(load_recipe("ft-polarity", [f"data.path={path}", "data.task=multiclass"]))
    assert task.num_labels == 3
    two = _labelled(tmp_path / "two.csv", 60)
    recipe = load_recipe("ft-polarity", [f"data.path={two}", "data.task=multiclass"])
    with pytest.raises(
        ConfigError, match="'multiclass' is for three or more classes, but .* 2 labels: 0, 1; set data.task=binary"
    ):
        recipe.adapter.prepare(recipe)


def test_a_file_states_its_labels_with_binary_multiclass_or_regression(tmp_path):
    path = _labelled(tmp_path / "l.csv", 60)
    with pytest.raises(ConfigError, match="data.task='rating' names the reviews' 5 star classes"):
        load_recipe("ft-polarity", [f"data.path={path}", "data.task=rating"])
    with pytest.raises(ConfigError, match="task: regression needs data.task='regression' on reviews or a file"):
        load_recipe("ft-polarity", [f"data.path={path}", "task=regression"])
    with pytest.raises(ConfigError, match="data.task='multiclass' is for a file's labels"):
        load_recipe("ft-reviews", ["data.task=multiclass"])
    assert (
        load_recipe("ft-polarity", [f"data.path={path}", "task=regression", "data.task=regression"]).task
        == "regression"
    )

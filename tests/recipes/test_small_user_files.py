"""A newcomer's first try on small own files: every family's first shipped recipe trains on a few hundred rows with
only ``data.path`` set; the recipe's sizes that do not fit give way (80/10/10, or the negatives the catalogue
allows), said on stderr and in ``report.md``; a size the user set that does not fit is refused; translation keeps
every pair of a user's file, and whatever a filter drops is counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from embreg.cli import main
from embreg.errors import ConfigError, DataError
from embreg.recipes import load_recipe
from embreg.tasks.data_files import data_line
from embreg.tasks.mlm.task import pretraining_texts
from embreg.tasks.text.task import load_text_task
from tests.helpers.pretrained_stub import tiny_pretrained
from tests.helpers.recipes import set_args
from tests.helpers.small_files import SMALL_FILES, small_file_overrides
from tests.helpers.translation import quick_overrides, write_pairs

FAST = ["train.epochs=1", "train.progress=false", "train.threads=1"]


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory):
    yield from tiny_pretrained(tmp_path_factory)


@pytest.mark.integration
@pytest.mark.parametrize("rows", [60, 300])
@pytest.mark.parametrize("family", sorted(SMALL_FILES))
def test_every_family_trains_a_small_own_file_on_the_first_try(stub, tmp_path, capsys, family, rows):
    """Only the file is named (plus one epoch, to keep the test short): the shipped sizes must not stop the run."""
    files = small_file_overrides(family, tmp_path, rows=rows)
    out = tmp_path / "run"
    code = main(["run", SMALL_FILES[family], *set_args([*files, *FAST]), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "embreg: error" not in err and (out / "metrics.json").exists()


def test_multitask_on_an_own_file_is_one_line_naming_the_single_task_recipes(tmp_path, capsys):
    files = small_file_overrides("classification", tmp_path)
    assert main(["run", "ft-reviews-multitask", *set_args([*files, *FAST]), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train it with a single-task recipe such as ft-reviews" in err


# -- who set a size decides whether it may give way -------------------------------------------------------------------


def test_the_recipes_sizes_fit_a_small_labelled_file_and_say_so(stub, tmp_path, capsys):
    files = small_file_overrides("classification", tmp_path)
    recipe = load_recipe("ft-reviews", files)
    assert recipe.data.fit_to_file == ["train_size", "valid_size", "test_size"]  # none set by the user
    assert load_text_task(recipe).sizes == {"train": 240, "valid": 30, "test": 30}  # 80/10/10
    out = tmp_path / "run"
    assert main(["run", "ft-reviews", *set_args([*files, *FAST]), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "labelled.csv is too small for the recipe's sizes; the 80/10/10 rule" in err
    assert "data.valid_size=500 -> 30, data.test_size=1000 -> 30, data.train_size=1000 -> 240" in err
    report = (out / "report.md").read_text()
    assert "300 rows used, `data.valid_size=500` fitted to 30, `data.test_size=1000` fitted to 30" in report
    split = json.loads((out / "split.json").read_text())
    assert split["data"]["fitted"] == {"valid_size": [500, 30], "test_size": [1000, 30], "train_size": [1000, 240]}
    assert yaml.safe_load((out / "config.yaml").read_text())["data"]["valid_size"] == 500  # the recipe, as loaded


def test_a_size_the_user_sets_is_used_as_given_and_refused_when_it_does_not_fit(tmp_path):
    files = small_file_overrides("classification", tmp_path)
    explicit = load_recipe("ft-reviews", [*files, "data.valid_size=500"])
    assert explicit.data.fit_to_file == ["train_size", "test_size"]
    with pytest.raises(ConfigError, match=r"valid_size=500 \+ test_size=30 leave no training rows; --set data"):
        load_text_task(explicit)
    fitting = load_recipe("ft-reviews", [*files, "data.valid_size=40"])
    assert load_text_task(fitting).sizes == {"train": 230, "valid": 40, "test": 30}
    own = tmp_path / "own.yaml"  # the user's own recipe file: what it writes is the user's
    own.write_text(f"name: own\ntask: classification\ndata: {{path: {tmp_path / 'labelled.csv'}, valid_size: 500}}\n")
    mine = load_recipe(own)
    assert mine.data.fit_to_file == ["train_size", "test_size"]  # left out: defaults, which fit
    with pytest.raises(ConfigError, match="valid_size=500"):
        load_text_task(mine)
    with pytest.raises(ConfigError, match="'eval_negatives' is not one of train_size, valid_size, test_size"):
        load_recipe("ft-reviews", [*files, "data.fit_to_file=[eval_negatives]"])
    with pytest.raises(ConfigError, match="data.path is not set"):
        load_recipe("ft-reviews", ["data.fit_to_file=[valid_size]"])


def test_sampled_negatives_fit_a_small_catalogue_unless_set(tmp_path, capsys):
    files = small_file_overrides("next-item", tmp_path)
    recipe = load_recipe("sasrec", files)
    assert recipe.data.fit_to_file == ["eval_negatives"]
    prepared = recipe.adapter.prepare(recipe)
    used = prepared.negatives["uniform"].shape[1]
    assert 1 <= used < 30 and prepared.negatives["popularity"].shape[1] == used
    assert prepared.source["fitted"] == {"eval_negatives": [100, used]}
    assert recipe.adapter.records(recipe, prepared)["split.json"]["eval_negatives"] == used
    assert f"data.eval_negatives=100 -> {used}" in capsys.readouterr().err
    again = load_recipe("sasrec", [*files, f"data.eval_negatives={used}"])  # what fits, set by the user: used
    assert again.adapter.prepare(again).negatives["uniform"].shape[1] == used
    explicit = load_recipe("sasrec", [*files, "data.eval_negatives=100"])
    with pytest.raises(DataError, match=f"--set data.eval_negatives={used} fits this data"):
        explicit.adapter.prepare(explicit)


def test_held_out_texts_fit_a_small_pretraining_file(tmp_path):
    files = small_file_overrides("mlm", tmp_path)
    splits, record = pretraining_texts(load_recipe("mlm", files).data)
    assert {name: len(texts) for name, texts in splits.items()} == {"train": 240, "valid": 30, "test": 30}
    assert record["fitted"] == {"valid_size": [500, 30], "test_size": [500, 30]} and record["rows"] == 300
    with pytest.raises(DataError, match="300 texts leave none to train on after valid_size=500 \\+ test_size=30"):
        pretraining_texts(load_recipe("mlm", [*files, "data.valid_size=500"]).data)
    with (tmp_path / "texts.txt").open("a") as handle:
        handle.write("\n\n")  # blank lines: dropped and counted
    _, record = pretraining_texts(load_recipe("mlm", [*files, "data.max_texts=100"]).data)
    assert record["dropped"] == {"blank lines": 2, "texts beyond data.max_texts=100": 140}
    assert "302 rows read, 2 blank lines dropped, 140 texts beyond data.max_texts=100 dropped, 160 rows used" in (
        data_line(record)
    )


# -- translation: a user's file keeps every pair; what filters drop is counted ------------------------------------


def _short_pairs(path: Path) -> int:
    lines = path.read_text().splitlines()[1:]
    return sum(min(len(side.split()) for side in line.split("\t")) < 3 for line in lines)


def test_translation_keeps_every_pair_of_a_users_file_and_counts_what_its_filters_drop(tmp_path, capsys):
    path = write_pairs(tmp_path / "pairs.tsv", rows=320)  # 1-5 words: many pairs are short
    short = _short_pairs(path)
    assert short > 50
    assert load_recipe("translation").data.min_words == 3  # the dictionary data's rule
    recipe = load_recipe("translation", [f"data.path={path}"])
    assert recipe.data.min_words == 1  # a user's file keeps every pair
    prepared = recipe.adapter.prepare(recipe)
    assert prepared.record["data"]["rows"] == 320 and "dropped" not in prepared.record["data"]
    capsys.readouterr()
    overrides = [o for o in quick_overrides(path, epochs=1) if not o.startswith("data.min_words")]
    out = tmp_path / "run"
    args = ["run", "translation", *set_args([*overrides, "data.min_words=3", "data.max_tokens=2", *FAST])]
    assert main([*args, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    dropped = f"{short} pairs with fewer than data.min_words=3 words on a side dropped"
    assert f"pairs.tsv: {dropped}" in err and "sentences longer than data.max_tokens=2 tokens cut" in err
    report = (out / "report.md").read_text()
    assert f"320 rows read, {dropped}, {320 - short} rows used" in report
    data = json.loads((out / "split.json").read_text())["data"]
    assert data["rows_read"] == 320 and data["rows"] == 320 - short and data["cut"]

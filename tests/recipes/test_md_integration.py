"""Mixed-dimension, NCF and CTR recipes end to end on slices of the real data (fetched once into the cache)."""

import json

import pytest

from embreg.cli import main
from embreg.recipes import load_recipe
from embreg.recipes.run import run_single

pytestmark = pytest.mark.integration

QUICK = ["train.epochs=2", "train.progress=false", "train.threads=1"]


@pytest.mark.parametrize("name, extra", [("md-mf", ["embeddings.budget=20000"]), ("md-ncf", []), ("ncf", [])])
def test_md_rating_recipes_land_in_a_sane_range(tmp_path, name, extra):
    m = run_single(load_recipe(name, QUICK + ["data.max_rows=20000", *extra]), tmp_path).metrics
    assert 0.85 < m["test_rmse"] < 1.35, m


@pytest.mark.parametrize("name", ["ctr-adult", "md-ctr-ml100k"])
def test_ctr_recipes_beat_the_constant_predictor(tmp_path, name):
    m = run_single(load_recipe(name, QUICK + ["data.max_rows=20000"]), tmp_path).metrics
    assert m["test_logloss"] < 0.69 and 0.6 < m["test_auc"] <= 1.0 and 0.5 < m["test_accuracy"] <= 1.0, m
    assert (tmp_path / "metrics.json").exists()


def test_cli_runs_an_md_recipe_with_overrides(tmp_path):
    out = tmp_path / "run"
    args = [
        "run",
        "md-ctr-adult",
        "--out",
        str(out),
        "--set",
        "embeddings.alpha=0.5",
        "--set",
        "embeddings.budget=1500",
    ]
    assert main(args + [x for s in QUICK + ["data.max_rows=5000"] for x in ("--set", s)]) == 0
    assert "test_logloss" in json.loads((out / "metrics.json").read_text())

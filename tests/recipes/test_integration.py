"""Recipes end to end on a slice of the real MovieLens-100k (fetched once into the cache)."""

import json

import pytest

from embreg.cli import main
from embreg.recipes import load_recipe
from embreg.recipes.run import run_single

pytestmark = pytest.mark.integration

QUICK = ["data.max_rows=20000", "train.epochs=3", "train.progress=false", "train.threads=1"]


@pytest.mark.parametrize("name", ["mf", "mf-dropout", "mf-sse-se", "mf-sse-graph"])
def test_rating_recipes_land_in_a_sane_range(tmp_path, name):
    result = run_single(load_recipe(name, QUICK), tmp_path)
    m = result.metrics
    assert 0.85 < m["test_rmse"] < 1.3, m
    assert 0.6 < m["test_mae"] < 1.1, m
    for f in (
        "config.yaml",
        "split.json",
        "history.jsonl",
        "metrics.json",
        "best.safetensors",
        "last.safetensors",
        "report.md",
    ):
        assert (tmp_path / f).exists(), f
    assert json.loads((tmp_path / "split.json").read_text())["split_seed"] == 0


@pytest.mark.parametrize("name", ["bpr", "bpr-sse-se", "bpr-sse-graph"])
def test_ranking_recipes_beat_random(tmp_path, name):
    m = run_single(load_recipe(name, QUICK + ["train.lr=0.01"]), tmp_path).metrics
    # a random ranking of ~1650 unseen items, with ~2 relevant ones per user, gives precision@10 near 0.001
    assert 0.01 < m["test_precision@10"] <= 1.0, m
    assert set(m) >= {"test_precision@1", "test_precision@5", "test_recall@10", "test_ndcg@10", "test_hit@10"}


def test_cli_run_seeds_writes_summary(tmp_path):
    out = tmp_path / "run"
    args = ["run", "mf-sse-se", "--seeds", "2", "--out", str(out)] + [x for s in QUICK for x in ("--set", s)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test_rmse"]["values"] and len(summary["test_rmse"]["values"]) == 2
    assert set(summary["test_rmse"]) >= {"mean", "std", "median", "min", "max", "values"}


def test_cli_resume_after_interruption_matches(tmp_path):
    full = run_single(load_recipe("mf-sse-se", QUICK + ["train.epochs=4"]), tmp_path / "full").metrics
    part = tmp_path / "part"
    run_single(load_recipe("mf-sse-se", QUICK + ["train.epochs=2"]), part)
    # a larger epoch budget on the same directory continues from the saved state, like a resume after a kill
    (part / "metrics.json").unlink()
    assert (
        main(
            ["run", "mf-sse-se", "--out", str(part), "--resume", "--set", "train.epochs=4"]
            + [x for s in QUICK if not s.startswith("train.epochs") for x in ("--set", s)]
        )
        == 0
    )
    resumed = json.loads((part / "metrics.json").read_text())
    assert resumed["test_rmse"] == pytest.approx(full["test_rmse"], abs=0)


def test_own_ratings_file(tmp_path):
    from embreg.data import load_ml100k

    ratings = load_ml100k().ratings
    path = tmp_path / "mine.csv"
    lines = ["uid,iid,stars"] + [
        f"u{u},i{i},{r}" for u, i, r in zip(ratings.users[:8000], ratings.items[:8000], ratings.ratings[:8000])
    ]
    path.write_text("\n".join(lines) + "\n")
    cfg = load_recipe(
        "mf-sse-se", QUICK + [f"data.path={path}", "data.user_col=uid", "data.item_col=iid", "data.rating_col=stars"]
    )
    m = run_single(cfg, tmp_path / "run").metrics
    assert 0.8 < m["test_rmse"] < 1.4

"""embreg.load_ensemble and `embreg ensemble`: seeds averaged, identical runs equal one run, mixed runs refused."""

from __future__ import annotations

import json

import pytest
import torch

from embreg.cli import main
from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.recipes.run import run_seeds, run_single
from embreg.serving import load, load_ensemble

QUICK = ["data.max_rows=2000", "train.epochs=2", "train.progress=false", "train.device=cpu", "train.lr=0.01"]


@pytest.fixture(scope="module")
def seeds_dir(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("ensemble-seeds")
    run_seeds(load_recipe("mf", QUICK), out, 3)
    return out


def test_an_ensemble_of_one_run_twice_scores_and_predicts_as_the_run(seeds_dir) -> None:
    single = load(seeds_dir / "seed-0")
    ensemble = load_ensemble([seeds_dir / "seed-0", seeds_dir / "seed-0"])
    assert ensemble.evaluate("test") == pytest.approx(single.evaluator(single.model, "test"), abs=1e-6)
    # the ensemble's TrainedRun serves the ensemble's model: its ratings are the single run's
    together = ensemble.run.evaluator.predict(ensemble.run.model, "test")
    assert torch.allclose(together, single.evaluator.predict(single.model, "test"), atol=1e-5)


def test_a_multi_seed_directory_stands_for_its_seeds(seeds_dir) -> None:
    ensemble = load_ensemble([seeds_dir])
    assert ensemble.labels == [str(seeds_dir / f"seed-{s}") for s in range(3)]
    members = ensemble.member_metrics("test")
    assert len(members) == 3 and len({m["rmse"] for m in members}) == 3  # independently seeded
    mean = sum(m["rmse"] for m in members) / 3
    assert ensemble.evaluate("test")["rmse"] <= mean + 1e-9  # a convex loss: never worse than the mean member


def test_runs_of_another_task_or_data_are_refused(seeds_dir, tmp_path) -> None:
    other_data = tmp_path / "other-data"
    run_single(load_recipe("mf", [*QUICK, "data.max_rows=1500"]), other_data)
    with pytest.raises(ConfigError, match=r"another data section .*data.max_rows: 1500 vs 2000"):
        load_ensemble([seeds_dir / "seed-0", other_data])
    other_task = tmp_path / "other-task"
    run_single(load_recipe("bpr", [*QUICK]), other_task)
    with pytest.raises(ConfigError, match="is a 'ranking' run, .* a 'rating' run"):
        load_ensemble([seeds_dir / "seed-0", other_task])
    with pytest.raises(ConfigError, match="at least two members"):
        load_ensemble([seeds_dir / "seed-0"])


def test_the_command_prints_members_and_ensemble_and_writes_json(seeds_dir, tmp_path, capsys) -> None:
    out = tmp_path / "ensemble.json"
    assert main(["ensemble", str(seeds_dir), "--split", "valid", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "rating ensemble of 3 members on the valid split" in printed and "| ensemble |" in printed
    result = json.loads(out.read_text())
    assert set(result) == {"task", "split", "members", "ensemble"} and len(result["members"]) == 3
    assert main(["ensemble", str(seeds_dir), "--split", "nope"]) == 2
    assert "split 'nope' is not one of this task's splits" in capsys.readouterr().err

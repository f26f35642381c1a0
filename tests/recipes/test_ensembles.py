"""A run's own ensembles: checkpoint averaging and snapshot ensembles, evaluated like the run's metrics."""

from __future__ import annotations

import pytest
import torch

from embreg.errors import DataError
from embreg.models.ensemble import PredictionEnsemble
from embreg.recipes import load_recipe
from embreg.recipes.run import run_single
from embreg.runs.checkpoint import load_checkpoint
from embreg.serving import load, load_ensemble
from embreg.train.snapshots import EpochSnapshots, average_states

QUICK = ["data.max_rows=2000", "train.progress=false", "train.device=cpu", "train.patience=null", "train.lr=0.01"]
RESTARTS = ["train.schedule=cosine-restarts", "train.restart_epochs=1", "train.snapshot_ensemble=true"]


def test_averaging_one_epoch_of_a_one_epoch_run_is_that_run() -> None:
    metrics = run_single(load_recipe("mf", [*QUICK, "train.epochs=1", "train.average_checkpoints=1"]), None).metrics
    assert metrics["averaged_epochs"] == 1
    assert metrics["averaged_test_rmse"] == metrics["test_rmse"]
    assert metrics["averaged_val_rmse"] == metrics["val_rmse"]


def test_the_averaged_model_is_the_mean_of_the_last_k_epochs_and_is_evaluated(tmp_path) -> None:
    metrics = run_single(load_recipe("mf", [*QUICK, "train.epochs=3", "train.average_checkpoints=2"]), tmp_path).metrics
    snapshots = EpochSnapshots(tmp_path)
    assert snapshots.epochs() == [1, 2]
    averaged = load_checkpoint(tmp_path / "averaged.safetensors")
    assert averaged["epochs"] == [1, 2]
    expected = average_states([snapshots.state(1), snapshots.state(2)])
    assert all(torch.equal(averaged["model"][k], expected[k]) for k in expected)
    run = load(tmp_path, checkpoint="averaged")  # the averaged model, served like the run's own
    assert all(torch.equal(run.model.state_dict()[k], expected[k]) for k in expected)
    assert run.evaluator(run.model, "test")["rmse"] == pytest.approx(metrics["averaged_test_rmse"], abs=1e-9)
    assert metrics["averaged_test_rmse"] != metrics["test_rmse"]


def test_a_snapshot_ensemble_averages_the_cycle_ends_predictions(tmp_path) -> None:
    recipe = load_recipe("mf", [*QUICK, "train.epochs=3", *RESTARTS, "train.average_checkpoints=2"])
    metrics = run_single(recipe, tmp_path).metrics
    assert metrics["snapshots_count"] == 3
    declared = set(recipe.adapter.metric_names(recipe))  # studies may read every key a run writes
    assert {k for k in metrics if k.startswith(("snapshots_", "averaged_"))} <= declared
    assert {"snapshots_test_rmse", "averaged_test_rmse"} <= set(metrics)
    ensemble = load_ensemble([tmp_path], snapshots=True)
    assert isinstance(ensemble.model, PredictionEnsemble) and len(ensemble.model.members) == 3
    assert ensemble.evaluate("test")["rmse"] == pytest.approx(metrics["snapshots_test_rmse"], abs=1e-9)
    assert ensemble.evaluate("valid")["rmse"] == pytest.approx(metrics["snapshots_val_rmse"], abs=1e-9)


def test_a_run_without_averaging_has_no_averaged_checkpoint_to_load(tmp_path) -> None:
    run_single(load_recipe("mf", [*QUICK, "train.epochs=1"]), tmp_path)
    with pytest.raises(DataError, match="train.average_checkpoints=K"):
        load(tmp_path, checkpoint="averaged")


def test_keep_checkpoints_none_keeps_no_snapshots(tmp_path) -> None:
    recipe = load_recipe("mf", [*QUICK, "train.epochs=2", *RESTARTS, "train.keep_checkpoints=none"])
    assert "snapshots_test_rmse" in run_single(recipe, tmp_path).metrics
    assert not (tmp_path / "snapshots").exists()

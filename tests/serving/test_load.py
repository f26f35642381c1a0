"""embreg.load: every family's model comes back with the weights the run evaluated, in eval mode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import embreg
from embreg.errors import ConfigError, DataError
from embreg.serving import load

FAMILIES = ["rating", "ranking", "next-item", "ctr", "lm", "classification"]


@pytest.mark.parametrize("family", FAMILIES)
def test_loaded_model_reproduces_the_runs_test_metrics(trained, family: str) -> None:
    path = trained(family)
    run = embreg.load(path)
    assert not run.model.training and run.task == family
    stored = json.loads((path / "metrics.json").read_text())
    again = run.evaluator(run.model, "test")
    for name, value in again.items():
        assert value == pytest.approx(stored[f"test_{name}"], rel=1e-5, abs=1e-6), name


def test_last_checkpoint_loads_and_best_is_the_default(trained) -> None:
    path = trained("rating")
    assert load(path).checkpoint == "best"
    assert load(path, checkpoint="last").checkpoint == "last"
    with pytest.raises(ConfigError, match="checkpoint='final' must be one of best, last, averaged"):
        load(path, checkpoint="final")


def test_missing_checkpoint_is_a_clear_error(trained, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(trained("rating"), copy)
    (copy / "best.safetensors").unlink()
    with pytest.raises(DataError, match=r"best\.safetensors.*keep_checkpoints"):
        load(copy)


def test_corrupt_checkpoint_is_a_clear_error(trained, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(trained("rating"), copy)
    (copy / "best.safetensors").write_bytes(b"not a checkpoint at all")
    with pytest.raises(DataError, match=r"best\.safetensors.*corrupt"):
        load(copy)


def test_changed_data_is_refused(trained, serving_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(trained("rating"), copy)
    record = json.loads((copy / "split.json").read_text())
    record["sizes"]["train"] += 1
    (copy / "split.json").write_text(json.dumps(record))
    with pytest.raises(DataError, match="not the data this run was trained on"):
        load(copy)


def test_not_a_run_directory_and_multi_seed_directories_are_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load(tmp_path / "nowhere")
    with pytest.raises(DataError, match="no config.yaml"):
        load(tmp_path)
    (tmp_path / "seed-0").mkdir()
    with pytest.raises(DataError, match="seed-0"):
        load(tmp_path)


@pytest.mark.parametrize("recipe", ["mf"])
def test_a_run_trained_on_two_ranks_loads_and_reproduces_its_metrics(recipe: str, tmp_path: Path) -> None:
    from tests.helpers.ddp import run_ranks
    from tests.helpers.serving_ddp import train_tiny

    overrides = ["data.max_rows=1500", "train.epochs=1", "train.progress=false", "train.device=cpu"]
    ranks = run_ranks(train_tiny, 2, str(tmp_path / "run"), recipe, overrides, timeout=300)
    assert ranks[0]["world_size"] == 2
    run = load(tmp_path / "run")
    for name, value in run.evaluator(run.model, "test").items():
        assert value == pytest.approx(ranks[0][f"test_{name}"], rel=1e-5, abs=1e-6), name

"""The run directory module: layout, round trips, checkpoint retention and the refusal of pickle checkpoints."""

import pickle

import pytest
import torch

from embreg.errors import DataError
from embreg.runs.run_dir import BEST_CHECKPOINT, LAST_CHECKPOINT, LEGACY_LAST_CHECKPOINT, RunDirectory


def test_files_round_trip(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.write_config({"name": "mf", "train": {"lr": 0.01}})
    run.write_record("split.json", {"sizes": {"train": 8}})
    run.write_history([{"epoch": 0, "val_rmse": 1.0}, {"epoch": 1, "val_rmse": 0.9}])
    run.write_metrics({"test_rmse": 0.9})
    run.write_report("# mf\n")
    assert sorted(p.name for p in run.path.iterdir()) == [
        "config.yaml",
        "history.jsonl",
        "metrics.json",
        "report.md",
        "split.json",
    ]
    assert run.read_history()[1]["val_rmse"] == 0.9
    assert run.read_metrics() == {"test_rmse": 0.9}
    assert RunDirectory(tmp_path / "missing").read_metrics() is None
    assert RunDirectory(tmp_path / "missing").read_history() == []


def test_record_names_stay_inside_the_directory(tmp_path):
    with pytest.raises(ValueError, match="plain"):
        RunDirectory(tmp_path).write_record("../escape.json", {})
    with pytest.raises(ValueError, match="plain"):
        RunDirectory(tmp_path).write_record("notes.txt", {})


def test_corrupt_metrics_is_a_clear_error(tmp_path):
    (tmp_path / "metrics.json").write_text("{not json")
    with pytest.raises(DataError, match="metrics.json is not valid JSON"):
        RunDirectory(tmp_path).read_metrics()


@pytest.mark.parametrize(
    ("keep", "left"), [("all", {BEST_CHECKPOINT, LAST_CHECKPOINT}), ("best", {BEST_CHECKPOINT}), ("none", set())]
)
def test_checkpoints_kept_as_asked(tmp_path, keep, left):
    run = RunDirectory(tmp_path)
    for which in ("best", "last"):
        run.save_checkpoint(which, {"model": {"w": torch.ones(2)}, "epoch": 1})
    assert torch.equal(run.load_checkpoint("best")["model"]["w"], torch.ones(2))
    run.drop_checkpoints(keep)
    assert {p.name for p in tmp_path.iterdir()} == left


def test_an_old_pickle_checkpoint_is_refused_and_never_loaded(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (marker.touch, ())

    (tmp_path / LEGACY_LAST_CHECKPOINT).write_bytes(pickle.dumps(Payload()))
    with pytest.raises(DataError, match="pickle checkpoints are no longer loaded"):
        RunDirectory(tmp_path).load_checkpoint("last")
    assert not marker.exists()
    assert RunDirectory(tmp_path).load_checkpoint("best") is None

"""Experiment loggers (train.log_to): they carry the run directory's numbers, and their failures never touch the run."""

from __future__ import annotations

import csv
import json
import re
import sys
import types
import warnings

import pytest

from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.recipes.run import run_single
from embreg.runs.run_dir import RunDirectory
from embreg.train import loggers as loggers_module
from embreg.train.loggers import CSVLogger, LoggerWarning, TensorBoardLogger, build_loggers

QUICK = ["data.max_rows=2000", "train.epochs=2", "train.progress=false", "train.threads=1", "train.patience=null"]
TIMINGS = {"seconds", "train_seconds", "seconds_per_step", "wall_seconds"}


def _without_timings(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in TIMINGS}


def _scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_csv_and_tensorboard_carry_the_history_numbers(tmp_path):
    pytest.importorskip("tensorboard")
    out = tmp_path / "run"
    metrics = run_single(load_recipe("mf", [*QUICK, "train.log_to=[csv, tensorboard]"]), out).metrics
    history = RunDirectory(out).read_history()
    assert len(history) == 2

    with open(out / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["epoch"]) for row in rows] == [0, 1]
    for row, record in zip(rows, history):
        assert set(row) == set(record)
        for key, value in record.items():
            assert float(row[key]) == value  # exactly: floats are written in their round-trip form

    scalars = _scalars(out / "tensorboard")
    for key in history[0]:
        if key != "epoch":
            expected = [(r["epoch"], pytest.approx(r[key], rel=1e-6, abs=1e-12)) for r in history]
            assert scalars[key] == expected, key
    assert scalars["final/test_rmse"] == [(metrics["best_epoch"], pytest.approx(metrics["test_rmse"], rel=1e-6))]
    assert not (out / ".lock").exists()


def test_a_failing_logger_warns_once_and_the_run_is_unchanged(tmp_path, monkeypatch):
    plain = run_single(load_recipe("mf", QUICK), tmp_path / "plain").metrics

    def broken(self, record, history):
        raise OSError("disk full")

    monkeypatch.setattr(CSVLogger, "log_epoch", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logged = run_single(load_recipe("mf", [*QUICK, "train.log_to=[csv]"]), tmp_path / "logged").metrics
    ours = [w for w in caught if issubclass(w.category, LoggerWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert "csv logger failed" in str(ours[0].message) and "disk full" in str(ours[0].message)

    assert _without_timings(logged) == _without_timings(plain)
    stored = json.loads((tmp_path / "logged" / "metrics.json").read_text())
    assert _without_timings(stored) == _without_timings(plain)
    histories = [RunDirectory(tmp_path / name).read_history() for name in ("plain", "logged")]
    assert [_without_timings(r) for r in histories[1]] == [_without_timings(r) for r in histories[0]]
    assert not (tmp_path / "logged" / "metrics.csv").exists()


def test_a_logger_that_cannot_start_is_disabled_and_the_others_go_on(tmp_path):
    loggers = build_loggers(["csv"], tmp_path)
    starts = []

    class Exploding(CSVLogger):
        name = "exploding"

        def log_epoch(self, record, history):
            starts.append(record["epoch"])
            raise RuntimeError("cannot connect")

    loggers.loggers.insert(0, Exploding(tmp_path))
    history = [{"epoch": 0, "val_rmse": 1.0}, {"epoch": 1, "val_rmse": 0.5}]
    with pytest.warns(LoggerWarning, match="exploding logger failed.*cannot connect"):
        loggers.log_epoch(history[0], history[:1])
    loggers.log_epoch(history[1], history)  # no second warning, no second call
    loggers.close()
    assert starts == [0]
    assert (tmp_path / "metrics.csv").read_text().splitlines() == ["epoch,val_rmse", "0,1.0", "1,0.5"]


def test_csv_gives_a_key_that_appears_later_its_own_column(tmp_path):
    logger = CSVLogger(tmp_path)
    history = [{"epoch": 0, "train_loss": 0.25}]
    logger.log_epoch(history[0], history)
    history.append({"epoch": 1, "train_loss": 0.125, "val_auc": 0.75, "note": None, "sizes": [1, 2]})
    logger.log_epoch(history[1], history)
    assert (tmp_path / "metrics.csv").read_text().splitlines() == [
        "epoch,train_loss,val_auc,note,sizes",
        "0,0.25,,,",
        '1,0.125,0.75,,"[1, 2]"',
    ]


def test_tensorboard_shows_each_epoch_once_after_a_resume(tmp_path):
    pytest.importorskip("tensorboard")
    history = [{"epoch": e, "val_rmse": 1.0 / (e + 1)} for e in range(3)]
    first = TensorBoardLogger(tmp_path)
    for e in range(2):
        first.log_epoch(history[e], history[: e + 1])
    first.close()
    history[1] = {"epoch": 1, "val_rmse": 0.4}  # the resumed run redid epoch 1 from its checkpoint
    resumed = TensorBoardLogger(tmp_path)
    resumed.log_epoch(history[2], history)
    resumed.close()
    assert _scalars(tmp_path / "tensorboard")["val_rmse"] == [
        (0, 1.0),
        (1, pytest.approx(0.4)),
        (2, pytest.approx(1 / 3)),
    ]


def test_wandb_gets_every_epoch_and_the_final_metrics(tmp_path, monkeypatch):
    calls: dict[str, list] = {"init": [], "log": [], "summary": [], "finish": []}

    class FakeRun:
        summary = types.SimpleNamespace(update=lambda values: calls["summary"].append(values))

        def log(self, values, step):
            calls["log"].append((step, values))

        def finish(self):
            calls["finish"].append(True)

    fake = types.ModuleType("wandb")
    fake.init = lambda **kwargs: calls["init"].append(kwargs) or FakeRun()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setenv("WANDB_PROJECT", "demo")

    loggers = build_loggers(["wandb"], tmp_path, run_name="mf-seed0", config={"name": "mf"})
    history = [{"epoch": 0, "train_loss": 0.5, "flag": True}, {"epoch": 1, "train_loss": 0.25, "flag": False}]
    for e in range(2):
        loggers.log_epoch(history[e], history[: e + 1])
    loggers.log_final({"test_rmse": 0.9, "best_epoch": 1, "extra": [1]})
    loggers.close()
    assert calls["init"] == [{"project": "demo", "name": "mf-seed0", "dir": str(tmp_path), "config": {"name": "mf"}}]
    assert calls["log"] == [(0, {"train_loss": 0.5}), (1, {"train_loss": 0.25})]
    assert calls["summary"] == [{"test_rmse": 0.9, "best_epoch": 1}]
    assert calls["finish"] == [True]


def test_unknown_or_repeated_loggers_are_refused():
    with pytest.raises(
        ConfigError,
        match=r"unknown logger 'tensorbord'; did you mean 'tensorboard'\? Valid loggers: tensorboard, csv, wandb",
    ):
        load_recipe("mf", ["train.log_to=[tensorbord]"])
    with pytest.raises(ConfigError, match="'csv' is listed twice"):
        load_recipe("mf", ["train.log_to=[csv, csv]"])


@pytest.mark.parametrize(
    ("name", "command"), [("wandb", "pip install wandb"), ("tensorboard", "pip install 'embreg[log]'")]
)
def test_a_logger_without_its_package_is_refused_with_the_pip_command(monkeypatch, name, command):
    monkeypatch.setattr(loggers_module, "_installed", lambda module: False)
    with pytest.raises(ConfigError, match=f"needs the '{name}' package.*{re.escape(command)}"):
        load_recipe("mf", [f"train.log_to=[{name}]"])


def test_without_a_run_directory_the_loggers_are_skipped_with_a_note():
    with pytest.warns(LoggerWarning, match=r"train.log_to=\['csv'\] is ignored: this run has no run directory"):
        loggers = build_loggers(["csv"], None)
    assert not loggers and loggers.callbacks() == []
    assert not build_loggers([], None)  # nothing asked, nothing said


def test_wandb_resumes_its_run_with_the_epochs_it_lacks(tmp_path, monkeypatch):
    inits, logged = [], []

    class FakeRun:
        id = "abc123"
        summary = types.SimpleNamespace(update=lambda values: None)

        def log(self, values, step):
            logged.append(step)

        def finish(self):
            pass

    fake = types.ModuleType("wandb")
    fake.init = lambda **kwargs: inits.append(kwargs) or FakeRun()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    history = [{"epoch": e, "train_loss": 1.0 / (e + 1)} for e in range(4)]
    first = build_loggers(["wandb"], tmp_path, run_name="mf-seed0")
    for e in range(2):
        first.log_epoch(history[e], history[: e + 1])
    first.close()  # the run is interrupted after epoch 1 (its checkpoint holds epochs 0-2: epoch 2 never got logged)
    resumed = build_loggers(["wandb"], tmp_path, run_name="mf-seed0")
    resumed.log_epoch(history[3], history)
    resumed.close()
    assert "id" not in inits[0] and (inits[1]["id"], inits[1]["resume"]) == ("abc123", "allow")
    assert logged == [0, 1, 2, 3]
    assert json.loads((tmp_path / "wandb.json").read_text()) == {"id": "abc123", "last_epoch": 3}

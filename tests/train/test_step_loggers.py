"""The CSV and TensorBoard loggers also record the training loss and learning rate every train.log_every steps."""

from __future__ import annotations

import csv

import pytest

from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.recipes.run import run_single
from embreg.runs.run_dir import RunDirectory
from embreg.train.loggers import STEPS_CSV, CSVLogger, build_loggers

QUICK = ["data.max_rows=2000", "train.epochs=2", "train.progress=false", "train.threads=1", "train.patience=null"]


def _steps_csv(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_csv_and_tensorboard_record_every_log_every_th_step(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    recipe = load_recipe("mf", [*QUICK, "train.batch_size=256", "train.log_every=2", "train.log_to=[csv, tensorboard]"])
    run_single(recipe, out)
    history = RunDirectory(out).read_history()
    per_epoch = -(-1600 // 256)  # 80% of 2000 ratings train, in batches of 256
    rows = _steps_csv(out / STEPS_CSV)
    assert [int(r["step"]) for r in rows] == list(range(2, 2 * per_epoch + 1, 2))
    assert [int(r["epoch"]) for r in rows] == [(int(r["step"]) - 1) // per_epoch for r in rows]
    assert all(float(r["lr"]) == recipe.train.lr for r in rows)
    assert all(abs(float(r["train_loss"]) - history[0]["train_loss"]) < 2.0 for r in rows)
    with open(out / "metrics.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 2  # metrics.csv keeps one row per epoch

    events = EventAccumulator(str(out / "tensorboard" / "steps"))
    events.Reload()
    assert {"train_loss", "lr"} <= set(events.Tags()["scalars"])
    logged = [(e.step, e.value) for e in events.Scalars("train_loss")]
    assert logged == [(int(r["step"]), pytest.approx(float(r["train_loss"]), rel=1e-6)) for r in rows]


def test_a_resumed_csv_drops_the_steps_of_the_lost_epoch(tmp_path):
    first = CSVLogger(tmp_path)
    for step in (10, 20, 30):
        first.log_step({"step": step, "epoch": step // 20, "train_loss": 1.0, "lr": 0.1})
    first.close()
    resumed = CSVLogger(tmp_path)  # the checkpoint was at step 20: steps 21.. are trained again
    resumed.log_step({"step": 30, "epoch": 1, "train_loss": 0.5, "lr": 0.1})
    resumed.close()
    rows = _steps_csv(tmp_path / STEPS_CSV)
    assert [(r["step"], r["train_loss"]) for r in rows] == [("10", "1.0"), ("20", "1.0"), ("30", "0.5")]


def test_log_every_filters_the_steps():
    seen: list[int] = []
    loggers = build_loggers([], None)
    assert loggers.step_callbacks() == []  # no logger records steps: the trainer calls nothing per step

    class Recording(CSVLogger):
        def log_step(self, record):
            seen.append(record["step"])

    from embreg.train.loggers import RunLoggers

    loggers = RunLoggers([Recording(".")], log_every=3)
    (callback,) = loggers.step_callbacks()
    for step in range(1, 10):
        callback(None, {"step": step})
    assert seen == [3, 6, 9]


def test_log_every_is_a_checked_train_key():
    assert load_recipe("mf").train.log_every == 50
    with pytest.raises(ConfigError, match="log_every"):
        load_recipe("mf", ["train.log_every=0"])
    with pytest.raises(ConfigError, match="did you mean 'train.log_every'"):
        load_recipe("mf", ["train.log_evry=10"])

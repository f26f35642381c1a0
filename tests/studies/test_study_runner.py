"""The study runner: records, the tuning choice, resume, torn lines, the lock, workers, failures, optuna."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap

import pytest

import embreg.recipes.run as run_module
from embreg.errors import ConfigError
from embreg.studies.runlog import RunLog
from embreg.studies.runner import LogLockedError, StudyRunError, lock_log, planned_runs, run_study
from embreg.studies.spec import StudySpec, load_study
from embreg.train.trainer import FitResult
from tests.studies.study_helpers import TINY, write_study

pytestmark = pytest.mark.integration

COMMON = ["data.max_rows=2000", "train.epochs=2", "train.progress=false", "train.threads=1"]


def _compared(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k.startswith(("val_", "test_")) or k == "best_epoch"}


def _counting(monkeypatch) -> list:
    calls: list = []
    real = run_module.run_single

    def counted(recipe, out_dir, **kwargs):
        calls.append((recipe.train.seed, recipe.model.l2, recipe.model.dropout))
        return real(recipe, out_dir, **kwargs)

    monkeypatch.setattr(run_module, "run_single", counted)
    return calls


def _fake(monkeypatch, fail_on: tuple | None = None) -> list:
    """A fast stand-in for training: val_rmse is smallest at l2 = 0.05, a little noise per seed."""
    calls: list = []

    def fake(recipe, out_dir, **kwargs):
        seed, l2 = recipe.train.seed, recipe.model.l2
        calls.append((seed, l2))
        if fail_on is not None and (seed, recipe.model.dropout) == fail_on:
            raise RuntimeError("the loss became NaN")
        value = 0.9 + (l2 - 0.05) ** 2 + 0.001 * seed + recipe.model.dropout / 10
        return FitResult(
            metrics={
                "best_epoch": 1,
                "val_rmse": value,
                "test_rmse": value + 0.01,
                "test_mae": value - 0.2,
                "wall_seconds": 0.0,
            },
            history=[],
        )

    monkeypatch.setattr(run_module, "run_single", fake)
    return calls


def test_the_log_holds_every_run_with_its_overrides(tiny_study):
    records = tiny_study.records
    assert records == RunLog(tiny_study.log).read()
    assert len(records) == 8
    tune = [r for r in records if r.phase == "tune"]
    final = [r for r in records if r.phase == "final"]
    assert len(tune) == 4 and len(final) == 4
    assert sorted((r.variant, r.setting["model.l2"], r.seed) for r in tune) == [
        ("MF", 0.0, 0),
        ("MF", 0.05, 0),
        ("MF-dropout", 0.0, 0),
        ("MF-dropout", 0.05, 0),
    ]
    assert sorted((r.variant, r.seed) for r in final) == [("MF", 0), ("MF", 1), ("MF-dropout", 0), ("MF-dropout", 1)]
    for r in records:
        variant_set = ["model.dropout=0.2"] if r.variant == "MF-dropout" else []
        assert r.overrides == COMMON + variant_set + [f"model.l2={r.setting['model.l2']}", f"train.seed={r.seed}"]
        assert r.recipe == "mf" and r.study == "tiny" and r.point == {}
        assert {"val_rmse", "test_rmse", "test_mae", "best_epoch"} <= set(r.metrics)
        assert r.seconds > 0 and r.finished and r.machine["cpus"]


def test_the_chosen_setting_is_the_best_validation_mean(tiny_study):
    for variant in ("MF", "MF-dropout"):
        tried = [r for r in tiny_study.records if r.phase == "tune" and r.variant == variant]
        order = [0.0, 0.05]  # grid order: ties go to the first
        values = {r.setting["model.l2"]: r.metrics["val_rmse"] for r in tried}
        best = min(order, key=lambda l2: (values[l2], order.index(l2)))
        finals = {r.setting["model.l2"] for r in tiny_study.records if r.phase == "final" and r.variant == variant}
        assert finals == {best}


def test_a_resumed_study_reruns_only_the_missing_run(tiny_study, tmp_path, monkeypatch):
    log = tiny_study.copy_log(tmp_path / "logs" / "tiny.jsonl")
    lines = log.read_text().splitlines(keepends=True)
    dropped = json.loads(lines[-1])
    log.write_text("".join(lines[:-1]))
    calls = _counting(monkeypatch)
    records = run_study(tiny_study.spec, log, progress=False)
    assert len(calls) == 1 and calls[0][0] == dropped["seed"]
    assert len(records) == 8
    redone = records[-1]
    assert (redone.variant, redone.phase, redone.seed, redone.overrides) == (
        dropped["variant"],
        dropped["phase"],
        dropped["seed"],
        dropped["overrides"],
    )
    assert _compared(redone.metrics) == _compared(dropped["metrics"])  # seeded: the same numbers again


def test_a_torn_last_line_is_ignored_and_redone(tiny_study, tmp_path, monkeypatch):
    log = tiny_study.copy_log(tmp_path / "tiny.jsonl")
    text = log.read_text()
    log.write_text(text[: len(text) - 200])  # an append cut short
    assert len(RunLog(log).read()) == 7
    calls = _counting(monkeypatch)
    records = run_study(tiny_study.spec, log, progress=False)
    assert len(calls) == 1 and len(records) == 8
    assert all(json.loads(line) for line in log.read_text().splitlines())  # no torn line left in the middle
    assert {r.key for r in records} == {r.key for r in tiny_study.records}


def test_a_complete_log_trains_nothing(tiny_study, tmp_path, monkeypatch):
    log = tiny_study.copy_log(tmp_path / "tiny.jsonl")
    calls = _counting(monkeypatch)
    assert len(run_study(tiny_study.spec, log, progress=False)) == 8
    assert calls == []


def test_a_second_runner_on_the_same_log_is_refused(tiny_study, tmp_path, monkeypatch):
    log = tiny_study.copy_log(tmp_path / "tiny.jsonl")
    calls = _counting(monkeypatch)
    with lock_log(log):
        with pytest.raises(LogLockedError, match="tiny.jsonl"):
            run_study(tiny_study.spec, log, progress=False)
    assert calls == []
    assert not (tmp_path / "tiny.jsonl.lock").exists()  # released and removed
    run_study(tiny_study.spec, log, progress=False)  # free again


def test_the_lock_holds_across_processes(tmp_path):
    log = tmp_path / "demo.jsonl"
    holder = textwrap.dedent(f"""
        import sys
        from embreg.studies.runner import lock_log
        with lock_log({str(log)!r}):
            print("locked", flush=True)
            sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(LogLockedError, match=f"demo.jsonl is in use by another runner \\(pid {proc.pid}\\)"):
            with lock_log(log):
                pass
    finally:
        proc.communicate("", timeout=30)
    with lock_log(log):  # the holder is gone
        pass


def test_two_workers_give_the_same_records(tiny_study, tmp_path):
    # one variant of the tiny study (4 runs, tuning and final) in two worker processes
    spec = dataclasses.replace(
        tiny_study.spec, variants={"MF-dropout": tiny_study.spec.variants["MF-dropout"]}, baseline=None, claims=[]
    )
    records = run_study(spec, tmp_path / "tiny.jsonl", workers=2, progress=False)
    serial = {r.key: r for r in tiny_study.records if r.variant == "MF-dropout"}
    assert len(records) == 4 and sorted(r.key for r in records) == sorted(serial)
    for r in records:
        assert r.overrides == serial[r.key].overrides
        assert _compared(r.metrics) == _compared(serial[r.key].metrics)


def test_a_failing_run_stops_the_study_and_names_its_overrides(tmp_path, monkeypatch):
    spec = load_study(write_study(tmp_path))
    calls = _fake(monkeypatch, fail_on=(1, 0.2))  # MF-dropout's second final seed
    log = tmp_path / "logs" / "tiny.jsonl"
    with pytest.raises(StudyRunError, match="model.dropout=0.2") as caught:
        run_study(spec, log, progress=False)
    message = str(caught.value)
    assert "train.seed=1" in message and "embreg run mf --set" in message and "resume" in message
    records = RunLog(log).read()
    assert len(records) == 7 and len(calls) == 8  # everything but the failed run, which was the last
    calls.clear()
    _fake(monkeypatch)
    assert len(run_study(spec, log, progress=False)) == 8  # resumes with the failed run only


def test_an_invalid_override_fails_before_any_training(tmp_path, monkeypatch):
    spec = load_study(write_study(tmp_path))
    calls = _fake(monkeypatch)
    with pytest.raises(ConfigError, match="nope"):
        run_study(spec, tmp_path / "x.jsonl", extra_overrides=["model.nope=1"], progress=False)
    assert calls == [] and not (tmp_path / "x.jsonl").exists()


def _optuna_spec(trials: int = 6) -> StudySpec:
    return StudySpec.from_mapping(
        {
            "name": "opt",
            "title": "optuna",
            "paper": "p.txt",
            "seeds": 2,
            "metrics": ["test_rmse"],
            "variants": {"MF": {"recipe": "mf"}, "MF-dropout": {"recipe": "mf", "set": ["model.dropout=0.1"]}},
            "common": COMMON,
            "tune": {"method": "optuna", "space": {"model.l2": [0.001, 0.3]}, "trials": trials, "seeds": 2},
        }
    )


def test_optuna_tuning_picks_the_best_trial_and_resumes_exactly(tmp_path, monkeypatch):
    pytest.importorskip("optuna")
    _fake(monkeypatch)
    spec = _optuna_spec()
    log = tmp_path / "opt.jsonl"
    records = run_study(spec, log, progress=False)
    assert len(records) == 2 * (6 * 2 + 2)
    for variant in spec.variants:
        tune = [r for r in records if r.phase == "tune" and r.variant == variant]
        means: dict = {}
        for r in tune:
            means.setdefault(r.setting["model.l2"], []).append(r.metrics["val_rmse"])
        assert len(means) == 6 and all(len(v) == 2 for v in means.values())
        assert all(0.001 <= l2 <= 0.3 for l2 in means)
        best = min(means, key=lambda l2: sum(means[l2]) / 2)
        assert {r.setting["model.l2"] for r in records if r.phase == "final" and r.variant == variant} == {best}
    # interrupted after 5 tuning runs: the rest is redone exactly as before
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:5]))
    again = run_study(spec, log, progress=False)
    assert [(r.key, r.overrides) for r in again[5:]] == [(r.key, r.overrides) for r in records[5:]]


def test_tiny_text_is_the_shipped_example():
    assert "tune:" in TINY  # the fixture's study file is a valid study


def test_a_variant_with_a_one_setting_grid_runs_no_tuning(tmp_path, monkeypatch):
    calls = _fake(monkeypatch)
    text = TINY.replace(
        "  space: {model.l2: [0.0, 0.05]}\n",
        "  space: {model.l2: [0.0, 0.05]}\n  per_variant: {MF-dropout: {}}\n",
    )
    spec = load_study(write_study(tmp_path, text))
    records = run_study(spec, tmp_path / "logs" / "tiny.jsonl", progress=False)
    assert sorted((r.variant, r.phase) for r in records if r.variant == "MF-dropout") == [("MF-dropout", "final")] * 2
    assert len(calls) == len(records) == 2 + 2 + 2
    assert planned_runs(spec) == len(records)

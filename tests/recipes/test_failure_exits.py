"""Failures exit honestly: a run that cannot give a right result exits non-zero with one line saying why."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from embreg.cli import main
from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.recipes.allocation import allocation_failure, refuse_allocation_failure
from tests.helpers.recipes import set_args
from tests.helpers.trainers import poison_last_step

QUICK = ["data.max_rows=2000", "train.epochs=1", "train.progress=false"]
SRC = Path(__file__).resolve().parents[2] / "src"


# -- configuration refused before anything runs -------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [0, -2])
def test_threads_below_one_is_a_config_error(threads):
    with pytest.raises(ConfigError, match=rf"train\.threads={threads} must be >= 1 or null"):
        load_recipe("mf", [*QUICK, f"train.threads={threads}"])


def test_threads_zero_is_one_line_on_the_command_line(tmp_path, capsys):
    assert main(["run", "mf", *set_args([*QUICK, "train.threads=0"]), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embreg: error: ") and err.count("\n") == 1 and "train.threads=0" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("dim, size", [(10**9, r"3\.4 TiB \(3772000000000 bytes\)"), (10**17, "more than 64-bit")])
def test_huge_model_dim_is_one_line_naming_the_bytes(tmp_path, capsys, restore_threads, dim, size):
    assert main(["run", "mf", *set_args([*QUICK, f"model.dim={dim}"]), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"embreg: error: model 'mf' (dim={dim},")
    assert "does not fit in memory" in err
    assert __import__("re").search(size, err), err


def test_allocation_failures_are_recognised_and_others_pass():
    assert allocation_failure(RuntimeError("CUDA out of memory. Tried to allocate 3.50 GiB")) == "3.50 GiB"
    assert allocation_failure(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) is None
    with pytest.raises(RuntimeError, match="shapes"):  # not an allocation failure: unchanged
        with refuse_allocation_failure("model 'x'"):
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")


def test_allocation_failure_outside_the_model_is_one_line(monkeypatch, capsys):
    import embreg.cli as cli

    def fails(args):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 4096 bytes")

    monkeypatch.setattr(cli, "cmd_list", fails)
    assert main(["list"]) == 2
    assert capsys.readouterr().err == (
        "embreg: error: out of memory: an allocation asked for 4.0 KiB (4096 bytes). Choose smaller sizes (model "
        "dimensions, train.batch_size) or a machine with more memory\n"
    )


# -- a reader that closes the pipe ------------------------------------------------------------------------------------


def test_list_json_into_a_closed_pipe_exits_quietly():
    """``embreg list --json | head``: the reader leaves early; no traceback, status 0."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    process = subprocess.Popen(
        [sys.executable, "-m", "embreg.cli", "list", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the first write (the import alone takes longer)
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 0, err
    assert err == ""


def test_a_broken_pipe_that_is_not_stdout_is_not_hidden(monkeypatch, capfd):
    import embreg.cli as cli

    def fails(args):
        raise BrokenPipeError("a worker's pipe")

    monkeypatch.setattr(cli, "cmd_list", fails)
    with pytest.raises(BrokenPipeError, match="worker"):
        main(["list"])


@pytest.mark.parametrize("lr", ["1e38", "nan", "inf"])
def test_an_absurd_learning_rate_is_one_line_before_anything_runs(tmp_path, capsys, lr):
    assert main(["run", "mf", *set_args([*QUICK, f"train.lr={lr}"]), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embreg: error: ") and "train.lr" in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


# -- non-finite results ---------------------------------------------------------------------------------------------


def test_nan_at_the_last_step_exits_non_zero(tmp_path, capsys, restore_threads, monkeypatch):
    poison_last_step(monkeypatch)
    out = tmp_path / "run"
    assert main(["run", "mf", *set_args(QUICK), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embreg: error: the weights became non-finite in epoch 0") and err.count("\n") == 1, err
    assert "checkpoint" not in err  # the first epoch failed: there is no good one
    assert not (out / "metrics.json").exists()


def test_non_finite_final_metric_exits_non_zero_and_the_run_is_not_finished(
    tmp_path, capsys, restore_threads, monkeypatch
):
    from embreg.tasks.ratings.evaluation import RatingEvaluator

    evaluate = RatingEvaluator.__call__

    def nan_on_test(self, model, split):
        metrics = evaluate(self, model, split)
        return {**metrics, "rmse": math.nan} if split == "test" else metrics

    monkeypatch.setattr(RatingEvaluator, "__call__", nan_on_test)
    out = tmp_path / "run"
    assert main(["run", "mf", *set_args(QUICK), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embreg: error: the run's final test_rmse is nan; the model's weights are finite"), err
    assert err.count("\n") == 1 and "a learning rate too high (train.lr=" in err and "the split cannot" in err
    assert "wall_seconds" not in (out / "metrics.json").read_text()  # resume will not take it for finished


# -- a sweep with a diverging trial -----------------------------------------------------------------------------------


def _diverge_on_calls(monkeypatch, diverging: set[int]) -> None:
    """The sweep's trials with these indices (0-based) get a NaN weight after their last step."""
    import embreg.recipes.run as run

    single = run.run_single
    calls = [0]

    def trial(recipe, out_dir, **kwargs):
        index, calls[0] = calls[0], calls[0] + 1
        if index not in diverging:
            return single(recipe, out_dir, **kwargs)
        with pytest.MonkeyPatch.context() as patch:
            poison_last_step(patch)
            return single(recipe, out_dir, **kwargs)

    monkeypatch.setattr(run, "run_single", trial)


def test_sweep_with_one_diverging_trial_completes_and_counts_it(tmp_path, capsys, restore_threads, monkeypatch):
    optuna = pytest.importorskip("optuna")
    studies = []
    create = optuna.create_study
    monkeypatch.setattr(optuna, "create_study", lambda **kw: studies.append(create(**kw)) or studies[-1])
    _diverge_on_calls(monkeypatch, {1})
    out = tmp_path / "sweep"
    assert main(["sweep", "mf", "--trials", "3", *set_args(QUICK), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 of 3 trials failed; their errors are in trials.csv" in printed and "best val_rmse = " in printed
    states = [trial.state for trial in studies[0].trials]
    assert states == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL, optuna.trial.TrialState.COMPLETE]
    assert "non-finite" in studies[0].trials[1].user_attrs["error"]
    import csv

    rows = list(csv.DictReader((out / "trials.csv").open()))
    assert [row["state"] for row in rows] == ["complete", "failed", "complete"]
    assert rows[1]["val_rmse"] == "" and "weights became non-finite" in rows[1]["error"]
    assert (out / "best.yaml").exists()


def test_sweep_trial_that_raises_anything_fails_and_the_sweep_goes_on(tmp_path, capsys, restore_threads, monkeypatch):
    """An overflow inside the optimizer (a RuntimeError, not a TrainingError) fails its trial only."""
    optuna = pytest.importorskip("optuna")
    import embreg.recipes.run as run

    studies = []
    create = optuna.create_study
    monkeypatch.setattr(optuna, "create_study", lambda **kw: studies.append(create(**kw)) or studies[-1])
    single, calls = run.run_single, [0]

    def overflow_on_second(recipe, out_dir, **kwargs):
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("value cannot be converted to type float\nwithout overflow")
        return single(recipe, out_dir, **kwargs)

    monkeypatch.setattr(run, "run_single", overflow_on_second)
    out = tmp_path / "sweep"
    assert main(["sweep", "mf", "--trials", "3", *set_args(QUICK), "--out", str(out)]) == 0
    assert "1 of 3 trials failed" in capsys.readouterr().out
    failed = studies[0].trials[1]
    assert failed.state == optuna.trial.TrialState.FAIL
    assert failed.user_attrs["error"] == "RuntimeError: value cannot be converted to type float without overflow"
    assert (out / "best.yaml").exists()


def test_sweep_trial_whose_sampled_values_are_refused_fails_alone(tmp_path, capsys, restore_threads):
    """A search space reaching learning rates the recipe refuses: those trials fail, the others are kept."""
    pytest.importorskip("optuna")
    recipe = tmp_path / "wide.yaml"
    recipe.write_text(
        "name: wide\ntask: rating\ndata: {dataset: ml-100k}\nmodel: {name: mf, dim: 8}\n"
        "search:\n  train.lr: {type: categorical, choices: [0.001, 1.0e+38]}\n"
    )
    out = tmp_path / "sweep"
    assert main(["sweep", str(recipe), "--trials", "4", *set_args(QUICK), "--out", str(out)]) == 0
    import csv

    rows = list(csv.DictReader((out / "trials.csv").open()))
    states = {row["train.lr"]: row["state"] for row in rows}
    assert states == {"0.001": "complete", "1e+38": "failed"}, rows
    assert all("train.lr=1e+38 must be in (0, 1000]" in r["error"] for r in rows if r["state"] == "failed")
    assert "train:\n  epochs: 1\n" in (out / "best.yaml").read_text()


def test_sweep_whose_every_trial_diverges_exits_non_zero(tmp_path, capsys, restore_threads, monkeypatch):
    pytest.importorskip("optuna")
    _diverge_on_calls(monkeypatch, {0, 1})
    out = tmp_path / "sweep"
    assert main(["sweep", "mf", "--trials", "2", *set_args(QUICK), "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("embreg: error: all 2 trials of the sweep failed"), err
    assert not (out / "best.yaml").exists() and (out / "trials.csv").exists()


def test_allocation_docstring_examples_run():
    import doctest

    import embreg.recipes.allocation

    result = doctest.testmod(embreg.recipes.allocation, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result

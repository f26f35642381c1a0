"""Serving uses exactly the run that was trained: one seed of a multi-seed run, a finished run, the config as it
trained, and it never writes over a run's files or its input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from embreg.cli import main
from embreg.errors import ConfigError, DataError, TrainingError
from embreg.recipes import list_recipes, load_recipe
from embreg.recipes.run import run_seeds, run_single
from embreg.runs.run_dir import RunDirectory
from embreg.serving import load
from embreg.serving.run_checks import UnfinishedRunWarning, UnservableRunError
from embreg.train.trainer import Trainer

QUICK = ["data.max_rows=500", "train.progress=false", "train.device=cpu", "train.threads=1"]


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    return copy


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# -- one seed of a multi-seed run ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("seeds") / "mf"
    run_seeds(load_recipe("mf", [*QUICK, "train.epochs=1"]), out, 2)
    return out


def test_a_multi_seed_run_is_served_one_seed_at_a_time(two_seeds: Path) -> None:
    with pytest.raises(
        DataError, match=r"multi-seed run \(seed-0, seed-1\); pick one with --seed S \(Python: seed=S\)"
    ):
        load(two_seeds)
    assert load(two_seeds, seed=1).path == two_seeds / "seed-1"
    assert load(two_seeds, seed=0).recipe.train.seed == 0
    with pytest.raises(DataError, match=r"has no seed 5; its seed folders are seed-0, seed-1"):
        load(two_seeds, seed=5)
    with pytest.raises(DataError, match=r"is a single-seed run, not a multi-seed one; leave out --seed"):
        load(two_seeds / "seed-0", seed=0)


def test_every_serving_command_takes_seed(two_seeds: Path, tmp_path: Path, capsys) -> None:
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("user_id,item_id\n196,242\n")
    out = tmp_path / "ratings.csv"
    assert main(["predict", str(two_seeds), "--input", str(pairs), "--out", str(out)]) == 2
    assert "pick one with --seed S" in capsys.readouterr().err and not out.exists()
    assert main(["predict", str(two_seeds), "--seed", "1", "--input", str(pairs), "--out", str(out)]) == 0
    assert main(["export", str(two_seeds), "--seed", "0", "--out", str(tmp_path / "export")]) == 0
    assert (tmp_path / "export" / "model.safetensors").is_file()
    for command in ("recommend", "score", "translate"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        shown = capsys.readouterr().out
        assert "--seed" in shown and "--allow-unfinished" in shown and "--allow-failed" in shown


# -- fine-tuned runs keep a checkpoint to serve -------------------------------------------------------------------
def test_every_shipped_recipe_keeps_a_checkpoint_to_serve() -> None:
    dropped = [name for name in list_recipes() if load_recipe(name).train.keep_checkpoints == "none"]
    assert dropped == []


def test_a_fine_tuned_run_with_the_recipes_defaults_predicts_and_exports(tmp_path: Path) -> None:
    from tests.helpers.finetune_tiny import tiny_checkpoint

    bert = tiny_checkpoint(tmp_path / "bert")
    recipe = load_recipe("ft-polarity", [f"model.pretrained={bert}", "model.pooling=cls", "train.epochs=1", *QUICK[1:]])
    run_single(recipe, tmp_path / "run")
    assert (tmp_path / "run" / "best.safetensors").is_file()
    texts = tmp_path / "texts.txt"
    texts.write_text("good film\nbad dress\n")
    assert main(["predict", str(tmp_path / "run"), "--input", str(texts), "--out", str(tmp_path / "p.csv")]) == 0
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "hf")]) == 0


def test_a_run_fine_tuned_from_a_relative_checkpoint_is_served_from_any_directory(tmp_path: Path, monkeypatch) -> None:
    """``--set model.pretrained=runs/mlm`` (the README's line) records the directory's absolute path, so the run is
    served from another working directory."""
    from tests.helpers.finetune_tiny import tiny_checkpoint

    tiny_checkpoint(tmp_path / "bert")
    monkeypatch.chdir(tmp_path)
    overrides = ["model.pretrained=bert", "model.pooling=cls", "train.epochs=1", *QUICK[1:]]
    run_single(load_recipe("ft-polarity", overrides), tmp_path / "run")
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["model"]["pretrained"] == str(
        tmp_path / "bert"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (elsewhere / "texts.txt").write_text("good film\nbad dress\n")
    assert main(["predict", str(tmp_path / "run"), "--input", "texts.txt", "--out", "p.csv"]) == 0
    assert main(["export", str(tmp_path / "run"), "--out", "hf"]) == 0
    assert load_recipe("ft-polarity").model.pretrained == "all-minilm-l6-v2"  # a registry name stays a name


# -- the config as trained ----------------------------------------------------------------------------------------
def test_the_run_record_holds_the_config_as_trained_and_the_status(trained) -> None:
    path = trained("rating")
    record = json.loads((path / "run.json").read_text())
    assert record["status"] == "finished"
    assert record["config"] == yaml.safe_load((path / "config.yaml").read_text())


def test_a_config_edited_after_training_is_refused_naming_the_key(trained, tmp_path: Path, capsys) -> None:
    copy = _copy(trained("classification"), tmp_path)
    config = yaml.safe_load((copy / "config.yaml").read_text())
    assert config["model"]["pooling"] == "cls"
    config["model"]["pooling"] = "mean"  # same weights, other predictions: never served silently
    config["train"]["epochs"] = 7
    (copy / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(ConfigError, match=r"edited after training \(model.pooling: 'cls' when trained, 'mean' now; "):
        load(copy)
    texts = tmp_path / "texts.txt"
    texts.write_text("good film\n")
    assert main(["predict", str(copy), "--input", str(texts), "--out", str(tmp_path / "p.csv")]) == 2
    assert "train.epochs: 1 when trained, 7 now" in capsys.readouterr().err


def test_config_edits_that_cannot_change_the_model_are_served(trained, tmp_path: Path) -> None:
    copy = _copy(trained("rating"), tmp_path)
    config = yaml.safe_load((copy / "config.yaml").read_text())
    config["train"].update(progress=True, threads=2, device="auto", log_to=["csv"], keep_checkpoints="best")
    (copy / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert load(copy).task == "rating"


def test_a_run_of_an_older_version_without_a_record_is_served(trained, tmp_path: Path) -> None:
    copy = _copy(trained("rating"), tmp_path)
    (copy / "run.json").write_text(json.dumps({"layout": "single", "world_size": 1}))
    assert load(copy).task == "rating"
    metrics = json.loads((copy / "metrics.json").read_text())
    del metrics["wall_seconds"]  # the trainer's own file: the runner never finished the run
    (copy / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(UnservableRunError, match="unfinished"):
        load(copy)


# -- unfinished and failed runs -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 3 epochs stopped (as by Ctrl-C or a kill) after its epoch 0."""
    out = tmp_path_factory.mktemp("stopped") / "mf"
    epoch = Trainer._run_epoch

    def stopping(self: Trainer, number: int) -> dict:
        if number == 1:
            raise KeyboardInterrupt
        return epoch(self, number)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Trainer, "_run_epoch", stopping)
        with pytest.raises(KeyboardInterrupt):
            run_single(load_recipe("mf", [*QUICK, "train.epochs=3"]), out)
    return out


def test_an_unfinished_run_is_refused_unless_allowed_and_then_warns(stopped_run: Path) -> None:
    assert json.loads((stopped_run / "run.json").read_text())["status"] == "training"
    with pytest.raises(UnservableRunError, match=r"unfinished .*best.safetensors holds epoch 0 \(counted from 0, of "):
        load(stopped_run)
    with pytest.raises(UnservableRunError, match=r"last.safetensors holds epoch 0 .*--allow-unfinished"):
        load(stopped_run, checkpoint="last")
    with pytest.warns(UnfinishedRunWarning, match=r"unfinished .*best.safetensors holds epoch 0"):
        run = load(stopped_run, allow_unfinished=True)
    assert run.epoch == 0


def test_unfinished_runs_are_refused_by_predict_and_export(stopped_run: Path, tmp_path: Path, capsys) -> None:
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("user_id,item_id\n196,242\n")
    out = tmp_path / "p.csv"
    assert main(["predict", str(stopped_run), "--input", str(pairs), "--out", str(out)]) == 2
    assert "is unfinished" in capsys.readouterr().err and not out.exists()
    assert main(["export", str(stopped_run), "--out", str(tmp_path / "export")]) == 2
    assert main(["predict", str(stopped_run), "--input", str(pairs), "--out", str(out), "--allow-unfinished"]) == 0
    assert "embreg: warning: serving run" in capsys.readouterr().err
    assert main(["export", str(stopped_run), "--allow-unfinished", "--out", str(tmp_path / "export")]) == 0
    assert capsys.readouterr().err.count("embreg: warning: serving run") == 1


def test_a_resumed_run_that_finished_is_served(stopped_run: Path, tmp_path: Path) -> None:
    copy = _copy(stopped_run, tmp_path)
    run_single(load_recipe("mf", [*QUICK, "train.epochs=3"]), copy, resume=True)
    assert json.loads((copy / "run.json").read_text())["status"] == "finished"
    assert load(copy).task == "rating"


def test_a_failed_run_is_refused_unless_allowed(tmp_path: Path, capsys) -> None:
    from tests.helpers.trainers import poison_last_step

    out = tmp_path / "failed"
    with pytest.MonkeyPatch.context() as patch, pytest.raises(TrainingError):
        poison_last_step(patch)  # epoch 1's last update makes a weight NaN: epoch 0 is the last good checkpoint
        run_single(load_recipe("mf", [*QUICK, "train.epochs=2"]), out)
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "failed" and record["error"]
    with pytest.raises(UnservableRunError, match=r"failed \(.*\): its last.safetensors holds epoch 0 .*--allow-failed"):
        load(out, checkpoint="last")
    with pytest.warns(UnfinishedRunWarning, match="failed"):
        load(out, checkpoint="last", allow_failed=True)
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("user_id,item_id\n196,242\n")
    args = ["predict", str(out), "--checkpoint", "last", "--input", str(pairs), "--out", str(tmp_path / "p.csv")]
    assert main(args) == 2
    assert "--allow-failed" in capsys.readouterr().err


def test_a_non_finite_prediction_is_never_ok(trained, tmp_path: Path, capsys) -> None:
    copy = _copy(trained("rating"), tmp_path)
    files = RunDirectory(copy)
    state = files.load_checkpoint("best")
    assert state is not None
    state["model"] = {key: torch.full_like(value, float("nan")) for key, value in state["model"].items()}
    files.save_checkpoint("best", state)
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("user,item\n007,i03\nnobody,i03\n")
    prediction = load(copy).predict(pairs)
    # the unseen user's fallback is the model's global mean plus the item's bias: not finite either
    assert prediction.table["status"].tolist() == ["non-finite", "non-finite"]
    assert prediction.summary["non_finite"] == 2 and "2 predictions are not finite" in prediction.summary_line()
    out = tmp_path / "p.csv"
    assert main(["predict", str(copy), "--input", str(pairs), "--out", str(out)]) == 1
    assert "2 of 2 predictions are not finite (status non-finite)" in capsys.readouterr().err
    assert pd.read_csv(out)["status"].tolist() == ["non-finite", "non-finite"]


# -- --out never destroys a run or the input ----------------------------------------------------------------------
def _command(command: str, run: Path, source: Path) -> list[str]:
    extra = {"recommend": ["--users", "007"], "predict": ["--input", str(source)]}
    return [command, str(run), *extra.get(command, ["--input", str(source)])]


@pytest.mark.parametrize("command", ["predict", "recommend", "score", "translate"])
@pytest.mark.parametrize("target", ["best.safetensors", "config.yaml", "metrics.json", "input"])
def test_out_never_writes_over_a_runs_file_or_the_input(
    trained, tmp_path: Path, capsys, command: str, target: str
) -> None:
    if command == "recommend" and target == "input":
        pytest.skip("recommend reads no input file")
    run = _copy(trained("rating"), tmp_path)
    source = tmp_path / "input.csv"
    source.write_text("user,item\n007,i03\n")
    out = source if target == "input" else run / target
    before, kept = _snapshot(run), source.read_bytes()
    assert main([*_command(command, run, source), "--out", str(out), "--overwrite"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and ("is the input file" if target == "input" else "a file of the run") in error
    assert _snapshot(run) == before and source.read_bytes() == kept


@pytest.mark.parametrize("command", ["predict", "recommend", "score", "translate"])
def test_out_that_cannot_be_a_file_or_exists_is_one_line(trained, tmp_path: Path, capsys, command: str) -> None:
    run = trained("rating")
    source = tmp_path / "input.csv"
    source.write_text("user,item\n007,i03\n")
    earlier = tmp_path / "earlier.csv"
    earlier.write_text("mine\n")
    cases = {
        str(source / "x.csv"): "lies below",
        str(tmp_path): "is a directory",
        str(earlier): "exists; replace it with --overwrite",
    }
    for out, message in cases.items():
        assert main([*_command(command, run, source), "--out", out]) == 2
        error = capsys.readouterr().err
        assert error.startswith("embreg: error: ") and message in error and error.count("\n") == 1
    assert earlier.read_text() == "mine\n"


def test_overwrite_replaces_an_earlier_prediction(trained, tmp_path: Path) -> None:
    source = tmp_path / "input.csv"
    source.write_text("user,item\n007,i03\n")
    out = tmp_path / "p.csv"
    out.write_text("old\n")
    assert main(["predict", str(trained("rating")), "--input", str(source), "--out", str(out), "--overwrite"]) == 0
    assert pd.read_csv(out, dtype={"user": str})["user"].tolist() == ["007"]


@pytest.mark.parametrize("command", ["run", "export"])
def test_a_directory_out_below_a_file_or_at_a_file_is_one_line(trained, tmp_path: Path, capsys, command: str) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine\n")
    head = (
        ["run", "mf", *[x for s in QUICK for x in ("--set", s)]]
        if command == "run"
        else ["export", str(trained("rating"))]
    )
    for out, message in ((blocker / "x", "lies below"), (blocker, "is an existing file, not a directory")):
        assert main([*head, "--out", str(out)]) == 2
        error = capsys.readouterr().err
        assert message in error and error.count("\n") == 1
    assert blocker.read_text() == "mine\n"


def test_ensemble_out_never_writes_over_a_runs_file(trained, tmp_path: Path, capsys) -> None:
    run = _copy(trained("rating"), tmp_path)
    before = _snapshot(run)
    assert main(["ensemble", str(run), str(run), "--out", str(run / "metrics.json"), "--overwrite"]) == 2
    assert "a file of the run" in capsys.readouterr().err and _snapshot(run) == before

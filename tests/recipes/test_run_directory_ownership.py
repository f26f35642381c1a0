"""A run directory belongs to one run: another run is refused unless it resumes (same config) or overwrites."""

from __future__ import annotations

import json
import shutil
import time

import pytest
import torch

from embreg import cli
from embreg.cli import main
from embreg.config import to_dict
from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.recipes.resume_check import check_resume, epochs_change_problem, extends_finished_run, refused_differences
from embreg.recipes.run import run_seeds, run_single
from embreg.runs.run_dir import RUN_ENTRIES, RUN_RECORD, RunDirectory, RunDirectoryInUseError
from tests.helpers.recipes import set_args

QUICK = ["data.max_rows=2000", "train.epochs=1", "train.progress=false", "train.threads=1"]


def _snapshot(path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``path`` with its modification time and bytes: what 'nothing was written' compares."""
    return {
        str(p.relative_to(path)): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(path.rglob("*")) if p.is_file()
    }


pytestmark = pytest.mark.usefixtures("restore_threads")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One finished single-seed ``mf`` run (1 epoch); tests copy it before they change it."""
    out = tmp_path_factory.mktemp("finished") / "run"
    before = torch.get_num_threads()
    run_single(load_recipe("mf", QUICK), out)
    torch.set_num_threads(before)
    return out


@pytest.fixture(scope="module")
def two_seed_run(tmp_path_factory):
    """One finished two-seed ``mf`` run; tests copy it before they change it."""
    out = tmp_path_factory.mktemp("seeds") / "run"
    before = torch.get_num_threads()
    run_seeds(load_recipe("mf", QUICK), out, 2)
    torch.set_num_threads(before)
    return out


def _copy(run, tmp_path):
    return shutil.copytree(run, tmp_path / "copy")


# -- ownership ----------------------------------------------------------------------------------------------------


def test_a_new_run_into_another_runs_directory_is_refused_naming_its_files_and_both_ways_on(
    finished_run, tmp_path, capsys
):
    out = _copy(finished_run, tmp_path)
    before = _snapshot(out)
    assert main(["run", "mf", *set_args(QUICK), "--set", "train.lr=0.01", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"embreg: error: run directory {out} already holds another run's files (")
    for name in ("config.yaml", "metrics.json", "history.jsonl", "last.safetensors"):
        assert name in err
    assert "--resume" in err and "--overwrite" in err
    assert _snapshot(out) == before  # nothing written
    with pytest.raises(RunDirectoryInUseError, match="overwrite=True"):  # the library refuses too
        run_single(load_recipe("mf", QUICK), out)
    with pytest.raises(RunDirectoryInUseError):
        run_seeds(load_recipe("mf", QUICK), out, 2)
    assert _snapshot(out) == before


def test_overwrite_empties_the_directory_first(two_seed_run, tmp_path, capsys):
    out = _copy(two_seed_run, tmp_path)
    assert {"seed-0", "seed-1", "summary.json"} <= {p.name for p in out.iterdir()}
    assert main(["run", "mf", *set_args(QUICK), "--set", "train.lr=0.01", "--out", str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "backends.json",
            "best.safetensors",
            "config.yaml",
            "history.jsonl",
            "last.safetensors",
            "metrics.json",
            "report.md",
        ]
        + [RUN_RECORD, "split.json"]
    )  # no stale seed-N/ or summary.json of the first run
    assert load_recipe(out / "config.yaml").train.lr == 0.01


def test_overwrite_of_fewer_seeds_leaves_no_stale_seed(two_seed_run, tmp_path):
    out = _copy(two_seed_run, tmp_path)
    summary = run_seeds(load_recipe("mf", [*QUICK, "train.seed=5"]), out, 1, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "report.md", RUN_RECORD, "seed-5", "summary.json"]
    assert len(summary["test_rmse"]["values"]) == 1


def test_overwrite_never_empties_a_directory_holding_files_no_run_writes(tmp_path):
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    (home / "notes.txt").write_text("mine")
    (home / "config.yaml").write_text("mine too\n")  # a run's name alone does not make it a run directory
    before = _snapshot(home)
    with pytest.raises(RunDirectoryInUseError, match=r"refuses to empty .*notes\.txt, project/.*Nothing was deleted"):
        RunDirectory(home).claim(overwrite=True)
    assert _snapshot(home) == before and (home / "project").is_dir()
    assert main(["run", "mf", *set_args(QUICK), "--out", str(home), "--overwrite"]) == 2
    assert _snapshot(home) == before


def test_a_directory_holding_no_run_may_be_written_and_resume_with_overwrite_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    RunDirectory(tmp_path).claim()  # files of no run: the run writes beside them
    RunDirectory(tmp_path / "new").claim(overwrite=True)  # nothing there: nothing to delete
    with pytest.raises(ConfigError, match="resume and overwrite exclude each other"):
        RunDirectory(tmp_path).claim(resume=True, overwrite=True)


def test_a_series_refused_before_its_first_seed_wrote_anything_leaves_the_directory_as_it_was(tmp_path, capsys):
    """A data error of a ``--seeds`` run (here: more sampled negatives than a 30-item catalogue allows) leaves no
    run files, as a refused single run does, so the corrected command runs without ``--overwrite``."""
    from tests.helpers.small_files import small_file_overrides

    files = small_file_overrides("next-item", tmp_path)
    out, mine = tmp_path / "run", tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    for target in (out, mine):
        refused = ["run", "sasrec", *set_args([*files, "data.eval_negatives=100", *QUICK[1:]]), "--seeds", "2"]
        assert main([*refused, "--out", str(target)]) == 2
        assert "fits this data" in capsys.readouterr().err
    assert not out.exists() and sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    fixed = ["run", "sasrec", *set_args([*files, "data.eval_negatives=5", *QUICK[1:]]), "--seeds", "2"]
    assert main([*fixed, "--out", str(out)]) == 0
    assert (out / "summary.json").is_file()
    with pytest.raises(ConfigError, match="data.eval_negatives"):  # a resume keeps what the run wrote
        run_seeds(load_recipe("sasrec", [*files, "data.eval_negatives=100", *QUICK[1:]]), out, 2, resume=True)
    assert (out / "config.yaml").is_file() and (out / RUN_RECORD).is_file()


def test_default_run_names_differ_for_runs_started_in_the_same_second(monkeypatch):
    monkeypatch.setattr(time, "strftime", lambda fmt, *args: "20240101-120000")
    names = {cli._default_out("mf") for _ in range(20)}
    assert len(names) == 20
    assert all(str(name).startswith("runs/mf-20240101-120000-") for name in names)


# -- resume checks the config -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "key", "stored", "now"),
    [
        ("train.lr=0.05", "train.lr", None, "0.05"),
        ("model.l2=0.5", "model.l2", None, "0.5"),
        ("data.max_rows=3000", "data.max_rows", "2000", "3000"),
        ("model.dim=4", "model.dim", "64", "4"),
    ],
)
def test_resume_with_a_changed_config_is_refused_before_anything_is_written(
    finished_run, tmp_path, capsys, override, key, stored, now
):
    out = _copy(finished_run, tmp_path)
    (out / "metrics.json").unlink()  # an interrupted run: resume would train
    before = _snapshot(out)
    if stored is None:  # the recipe's own value
        section, name = key.split(".")
        stored = json.dumps(getattr(getattr(load_recipe("mf", QUICK), section), name))
    assert main(["run", "mf", *set_args(QUICK), "--set", override, "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"embreg: error: cannot resume {out}: the run there differs from this one in {key}: ")
    assert f"{now} now" in err and (stored in err)
    assert _snapshot(out) == before  # config.yaml unchanged, nothing else written either


def test_the_refusal_names_both_values(finished_run):
    with pytest.raises(
        ConfigError,
        match=r"in model\.l2: 0\.1113\d* in the run, 0\.5 now; train\.lr: 0\.000734\d* in the run, 0\.05 now\.",
    ):
        check_resume(
            RunDirectory(finished_run),
            load_recipe("mf", [*QUICK, "train.lr=0.05", "model.l2=0.5"]),
            layout="single",
            world_size=1,
        )


def test_safe_keys_may_change_on_resume(finished_run):
    safe = ["train.device=cpu", "train.threads=2", "train.progress=true", "train.log_to=[csv]", "train.epochs=3"]
    safe += ["train.keep_checkpoints=best", "train.precision=bf16", "train.log_every=7"]
    check_resume(RunDirectory(finished_run), load_recipe("mf", [*QUICK, *safe]), layout="single", world_size=1)
    with pytest.raises(ConfigError, match=r"in train\.patience: 5 in the run, 2 now\. A resume continues"):
        check_resume(
            RunDirectory(finished_run), load_recipe("mf", [*QUICK, "train.patience=2"]), layout="single", world_size=1
        )


def test_a_different_world_size_is_refused(finished_run, tmp_path, capsys):
    assert json.loads((finished_run / RUN_RECORD).read_text()).items() >= {"layout": "single", "world_size": 1}.items()
    with pytest.raises(ConfigError, match=r"world size: 1 process\(es\) trained the run, 2 now"):
        check_resume(RunDirectory(finished_run), load_recipe("mf", QUICK), layout="single", world_size=2)
    out = _copy(finished_run, tmp_path)
    (out / RUN_RECORD).write_text(json.dumps({"layout": "single", "world_size": 2}))  # as a 2-rank run writes it
    (out / "metrics.json").unlink()
    before = _snapshot(out)
    assert main(["run", "mf", *set_args(QUICK), "--out", str(out), "--resume"]) == 2
    assert "world size: 2 process(es) trained the run, 1 now" in capsys.readouterr().err
    assert _snapshot(out) == before


def test_resume_with_more_epochs_extends_a_finished_run(finished_run, tmp_path, capsys):
    out = _copy(finished_run, tmp_path)
    first = json.loads((out / "metrics.json").read_text())
    assert first["epochs_run"] == 1
    sets = set_args([s for s in QUICK if not s.startswith("train.epochs")])
    assert main(["run", "mf", *sets, "--set", "train.epochs=3", "--out", str(out), "--resume"]) == 0
    extended = json.loads((out / "metrics.json").read_text())
    assert extended["epochs_run"] == 3 and extended["wall_seconds"] != first["wall_seconds"]
    assert [r["epoch"] for r in RunDirectory(out).read_history()] == [0, 1, 2]
    assert load_recipe(out / "config.yaml").train.epochs == 3
    full = run_single(load_recipe("mf", [*QUICK, "train.epochs=3"]), tmp_path / "full").metrics
    assert extended["test_rmse"] == pytest.approx(full["test_rmse"], abs=0)  # an exact continuation
    # the same budget again: a finished run is read back as it is
    assert main(["run", "mf", *sets, "--set", "train.epochs=3", "--out", str(out), "--resume"]) == 0
    assert json.loads((out / "metrics.json").read_text()) == extended


def test_extending_a_finished_run_without_its_last_checkpoint_is_refused(tmp_path):
    out = tmp_path / "run"
    run_single(load_recipe("mf", [*QUICK, "train.keep_checkpoints=best"]), out)
    before = _snapshot(out)
    with pytest.raises(ConfigError, match=r"kept no last\.safetensors \(train\.keep_checkpoints='best'"):
        run_single(load_recipe("mf", [*QUICK, "train.epochs=2", "train.keep_checkpoints=best"]), out, resume=True)
    assert _snapshot(out) == before


def test_fewer_epochs_on_resume_are_refused(finished_run):
    recipe = load_recipe("mf", [s for s in QUICK if not s.startswith("train.epochs")] + ["train.epochs=1"])
    stored = RunDirectory(finished_run).read_config()
    assert stored is not None
    stored["train"]["epochs"] = 4
    assert [key for key, _, _ in refused_differences(stored, to_dict(recipe))] == ["train.epochs"]
    assert epochs_change_problem(stored, to_dict(recipe)) == "train.epochs may only grow on resume (to extend a run)"
    linear = {"train": {"epochs": 5, "schedule": "linear"}}
    assert "linear" in str(epochs_change_problem({"train": {"epochs": 4, "schedule": "linear"}}, linear))


def test_seeds_resume_with_a_changed_config_is_refused(two_seed_run, tmp_path, capsys):
    out = _copy(two_seed_run, tmp_path)
    before = _snapshot(out)
    args = ["run", "mf", *set_args(QUICK), "--seeds", "3", "--out", str(out), "--resume"]
    assert main([*args, "--set", "train.lr=0.05"]) == 2
    assert "train.lr: " in capsys.readouterr().err
    assert _snapshot(out) == before and not (out / "seed-2").exists()
    # a single-seed resume of a multi-seed directory is refused too
    assert main(["run", "mf", *set_args(QUICK), "--out", str(out), "--resume"]) == 2
    assert "it holds a multi-seed run" in capsys.readouterr().err
    assert _snapshot(out) == before


def test_resuming_with_fewer_seeds_than_the_run_holds_is_refused(two_seed_run, tmp_path):
    """``--seeds 1 --resume`` of a 2-seed run would summarise one seed and leave the other unsummarised."""
    out = _copy(two_seed_run, tmp_path)
    before = _snapshot(out)
    with pytest.raises(ConfigError, match=r"with --seeds 1: it holds 2 seed run\(s\) \(seed-0 .. seed-1\).*--seeds 2"):
        run_seeds(load_recipe("mf", QUICK), out, 1, resume=True)
    assert _snapshot(out) == before
    summary = json.loads((out / "summary.json").read_text())
    assert run_seeds(load_recipe("mf", QUICK), out, 2, resume=True) == summary  # the same seeds: read back
    assert len(summary["test_rmse"]["values"]) == 2


def test_a_run_written_before_a_config_key_existed_resumes(tmp_path):
    """A key the stored config lacks and the new one holds empty (``data.fit_to_file: []``) is no difference."""
    recipe = load_recipe("sasrec")
    files = RunDirectory(tmp_path / "run")
    config = to_dict(recipe)
    assert config["data"].pop("fit_to_file") == []
    files.write_config(config)
    check_resume(files, recipe, layout="single", world_size=1)
    config["data"]["fit_to_file"] = ["eval_negatives"]
    files.write_config(config)
    with pytest.raises(ConfigError, match=r"data.fit_to_file: \["):
        check_resume(files, recipe, layout="single", world_size=1)


def test_a_seed_whose_stored_config_differs_is_refused(two_seed_run, tmp_path):
    out = _copy(two_seed_run, tmp_path)
    config = RunDirectory(out / "seed-1").read_config()
    assert config is not None
    config["model"]["dim"] = 4  # the series' own config matches; one seed's does not
    RunDirectory(out / "seed-1").write_config(config)
    (out / "seed-1" / "metrics.json").unlink()
    with pytest.raises(ConfigError, match=r"cannot resume .*seed-1: .*model\.dim: 4 in the run, 64 now"):
        run_seeds(load_recipe("mf", QUICK), out, 2, resume=True)


def test_a_run_that_early_stopping_ended_is_not_extended(tmp_path):
    files = RunDirectory(tmp_path)
    files.write_config({"train": {"epochs": 10}})
    files.write_metrics({"epochs_run": 6, "wall_seconds": 1.0})  # stopped early, at 6 of 10 epochs
    assert not extends_finished_run(files, {"train": {"epochs": 20}})
    files.write_metrics({"epochs_run": 10, "wall_seconds": 1.0})  # used up its budget
    assert extends_finished_run(files, {"train": {"epochs": 20}})
    assert not extends_finished_run(files, {"train": {"epochs": 10}})


def test_every_file_a_run_writes_is_known_as_a_run_file(tmp_path):
    """Overwrite deletes and the ownership check recognises exactly RUN_ENTRIES: a run file missing there would make
    ``--overwrite`` refuse its own run's directory."""
    out = tmp_path / "run"
    run_single(
        load_recipe("mf", [*QUICK, "train.log_to=[csv]", "train.log_every=1", "train.keep_checkpoints=all"]), out
    )
    written = {p.name for p in out.iterdir()}
    assert {"backends.json", "steps.csv", "metrics.csv", "last.safetensors"} <= written
    assert written <= RUN_ENTRIES
    RunDirectory(out).claim(overwrite=True)
    assert list(out.iterdir()) == []

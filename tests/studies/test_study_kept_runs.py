"""Studies that keep their final runs (``keep_runs``): the run directories, reading them back, an unfinished one
continuing from its last epoch, the refusals, the log field and the page."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import embreg.recipes.run as run_module
from embreg.cli import main
from embreg.errors import ConfigError
from embreg.studies.kept import metrics_stamp
from embreg.studies.report import write_report
from embreg.studies.runlog import RunLog, RunRecord
from embreg.studies.runner import Job, run_study
from embreg.studies.spec import StudySpec, load_study
from tests.studies.study_helpers import write_study

pytestmark = pytest.mark.integration

KEPT = """\
name: kept
title: Kept MF runs
paper: sse-stochastic-shared-embeddings.txt
variants:
  MF: {recipe: mf}
  MF + Dropout: {recipe: mf, set: [model.dropout=0.2]}
common: [data.max_rows=2000, train.epochs=1, train.progress=false, train.threads=1, train.keep_checkpoints=best]
tune:
  method: grid
  space: {model.l2: [0.0, 0.05]}
  per_variant: {MF + Dropout: {}}
seeds: 2
metrics: [test_rmse]
keep_runs: runs/kept
"""

FINAL_DIRS = sorted(f"runs/kept/{slug}/seed-{seed}" for slug in ("mf", "mf-dropout") for seed in (0, 1))


@dataclass
class KeptStudy:
    folder: Path  # the directory the study ran from (keep_runs is relative to it)
    spec: StudySpec
    log: Path
    records: list[RunRecord]

    def copy(self, to: Path, *, tuning_only: bool) -> Path:
        """The study's folder (kept runs too, times kept) under ``to``; a log of its tuning runs only when asked."""
        shutil.copytree(self.folder, to, dirs_exist_ok=True)
        log = to / "logs" / "kept.jsonl"
        if tuning_only:
            lines = [line for line in log.read_text().splitlines(keepends=True) if '"phase": "tune"' in line]
            log.write_text("".join(lines))
        return log


@pytest.fixture(scope="module")
def kept_study(tmp_path_factory) -> KeptStudy:
    folder = tmp_path_factory.mktemp("kept-study")
    spec = load_study(write_study(folder, KEPT, name="kept"))
    log = folder / "logs" / "kept.jsonl"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)  # keep_runs: runs/kept is relative to where the study runs
        records = run_study(spec, log, progress=False)
    return KeptStudy(folder, spec, log, records)


def _no_training(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a kept, finished run was trained again")

    monkeypatch.setattr(run_module, "build_run", refuse)


def test_final_runs_are_kept_as_run_directories_with_their_checkpoints(kept_study):
    final = [r for r in kept_study.records if r.phase == "final"]
    assert sorted(r.run_dir for r in final) == FINAL_DIRS
    for record in final:
        run_dir = kept_study.folder / record.run_dir
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert metrics["test_rmse"] == record.metrics["test_rmse"]
        assert (run_dir / "best.safetensors").is_file() and not (run_dir / "last.safetensors").exists()
        assert (run_dir / "config.yaml").is_file() and (run_dir / "report.md").is_file()
    assert all(r.run_dir is None for r in kept_study.records if r.phase == "tune")  # tuning keeps nothing
    assert sorted(p.relative_to(kept_study.folder).as_posix() for p in kept_study.folder.glob("runs/kept/*/*")) == (
        FINAL_DIRS
    )
    logged = [json.loads(line) for line in kept_study.log.read_text().splitlines()]
    assert sorted(d["run_dir"] for d in logged if d["phase"] == "final") == FINAL_DIRS
    assert all("run_dir" not in d for d in logged if d["phase"] == "tune")


def test_a_new_log_reads_the_kept_runs_back_without_training(kept_study, tmp_path, monkeypatch):
    log = kept_study.copy(tmp_path, tuning_only=True)
    monkeypatch.chdir(tmp_path)
    stamps = {d: metrics_stamp(d) for d in FINAL_DIRS}
    _no_training(monkeypatch)
    records = run_study(kept_study.spec, log, progress=False)
    assert {d: metrics_stamp(d) for d in FINAL_DIRS} == stamps  # nothing rewritten
    before = {r.key: r for r in kept_study.records}
    final = [r for r in records if r.phase == "final"]
    assert len(final) == 4
    for record in final:
        assert record.metrics == before[record.key].metrics and record.run_dir == before[record.key].run_dir
        assert record.seconds == record.metrics["wall_seconds"]  # the time it took when it was trained


def test_a_kept_directory_of_another_config_is_refused_naming_it(kept_study, tmp_path, monkeypatch):
    log = kept_study.copy(tmp_path, tuning_only=True)
    monkeypatch.chdir(tmp_path)
    _no_training(monkeypatch)
    with pytest.raises(ConfigError, match="runs/kept/mf/seed-0") as caught:
        run_study(kept_study.spec, log, extra_overrides=["train.lr=0.5"], progress=False)
    assert "train.lr" in str(caught.value) and "keep_runs" in str(caught.value)
    assert not any(r.phase == "final" for r in RunLog(log).read())


def test_the_command_line_reports_a_refused_kept_directory_in_one_line(kept_study, tmp_path, monkeypatch, capsys):
    log = kept_study.copy(tmp_path, tuning_only=True)
    monkeypatch.chdir(tmp_path)
    _no_training(monkeypatch)
    argv = ["study", "run", "kept.yaml", "--log", str(log), "--set", "train.lr=0.5", "--no-report", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("embreg: error: study kept:") and "runs/kept/mf/seed-0" in err
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("variants", "grid", "named"),
    [
        ({"MLM+SSE": {"recipe": "mf"}, "mlm sse": {"recipe": "mf"}}, {}, ["'MLM+SSE'", "'mlm sse'", "'mlm-sse'"]),
        ({"MF": {"recipe": "mf"}}, {"model.l2": [-1, 1]}, ["'model.l2=-1'", "'model.l2=1'", "'model-l2-1'"]),
        ({"MF": {"recipe": "mf"}, "+++": {"recipe": "mf"}}, {}, ["'+++'"]),
    ],
)
def test_colliding_or_empty_slugs_are_refused_when_the_study_is_loaded(tmp_path, variants, grid, named):
    data = {"name": "c", "title": "t", "paper": "p.txt", "metrics": ["test_rmse"], "variants": variants, "grid": grid}
    StudySpec.from_mapping(data)  # without keep_runs no folder is named, so nothing collides
    with pytest.raises(ConfigError, match="keep_runs") as caught:
        StudySpec.from_mapping({**data, "keep_runs": "runs/c"})
    assert all(name in str(caught.value) for name in named)


def test_a_grid_point_gets_its_own_folder_level():
    spec = StudySpec.from_mapping(
        {
            "name": "g",
            "title": "t",
            "paper": "p.txt",
            "metrics": ["test_rmse"],
            "variants": {"No CPT": {"recipe": "mf"}},
            "grid": {"data.task": ["binary"]},
            "keep_runs": "runs/g",
            "seeds": 1,
        }
    )
    from embreg.studies.runner import _Cell

    job = _Cell(spec, "No CPT", {"data.task": "binary"}, [], {}).job("final", {}, 3)
    assert job.run_dir == "runs/g/no-cpt/data-task-binary/seed-3"
    assert job.command().endswith("--out runs/g/no-cpt/data-task-binary/seed-3 --resume")
    assert _Cell(spec, "No CPT", {"data.task": "binary"}, [], {}).job("tune", {}, 3).run_dir is None


def test_a_log_without_run_dir_still_loads(tmp_path):
    old = {
        "study": "demo",
        "variant": "MF",
        "point": {},
        "phase": "final",
        "setting": {},
        "seed": 0,
        "overrides": ["train.seed=0"],
        "recipe": "mf",
        "metrics": {"test_rmse": 0.9},
        "seconds": 1.0,
        "machine": {},
        "finished": "2025-01-01T00:00:00Z",
    }
    log = RunLog(tmp_path / "demo.jsonl")
    log.path.write_text(json.dumps(old) + "\n")
    log.append(RunRecord(**{**old, "seed": 1, "run_dir": "runs/demo/mf/seed-1"}))
    log.append(RunRecord(**{**old, "seed": 2}))
    records = log.read()
    assert [r.run_dir for r in records] == [None, "runs/demo/mf/seed-1", None]
    lines = log.path.read_text().splitlines()
    assert "run_dir" not in lines[2]  # a record that kept nothing is written as before


def test_the_study_page_says_where_the_runs_were_kept(kept_study, tmp_path):
    write_report(kept_study.spec, kept_study.records, tmp_path / "page", command="embreg study run kept.yaml")
    page = (tmp_path / "page" / "README.md").read_text()
    assert "- kept runs: 4 of the 4 final runs are run directories under `runs/kept`" in page
    assert "`<variant>/seed-<s>`" in page


def test_a_study_without_keep_runs_says_nothing_of_kept_runs(tiny_study, tmp_path):
    write_report(tiny_study.spec, tiny_study.records, tmp_path / "page", command="embreg study run tiny.yaml")
    assert "kept runs" not in (tmp_path / "page" / "README.md").read_text()
    assert all(r.run_dir is None for r in tiny_study.records)


def test_an_unfinished_kept_run_continues_from_its_last_epoch(tmp_path, monkeypatch):
    from embreg.recipes import load_recipe
    from embreg.train.trainer import Trainer

    quick = ["data.max_rows=2000", "train.progress=false", "train.threads=1"]
    whole = run_module.run_single(load_recipe("mf", [*quick, "train.epochs=2", "train.seed=0"]), tmp_path / "whole")
    monkeypatch.chdir(tmp_path)
    cut = tmp_path / "runs" / "unfinished" / "mf" / "seed-0"
    run_module.run_single(load_recipe("mf", [*quick, "train.epochs=1", "train.seed=0"]), cut)
    (cut / "metrics.json").unlink()  # as a kill after the first epoch's last.safetensors leaves it
    epochs: list[int] = []
    run_epoch = Trainer._run_epoch

    def counted(self, epoch):
        epochs.append(epoch)
        return run_epoch(self, epoch)

    monkeypatch.setattr(Trainer, "_run_epoch", counted)
    spec = StudySpec.from_mapping(
        {
            "name": "unfinished",
            "title": "A kept MF run cut off after its first epoch",
            "paper": "p.txt",
            "seeds": 1,
            "variants": {"MF": {"recipe": "mf"}},
            "metrics": ["test_rmse"],
            "common": [*quick, "train.epochs=2"],
            "keep_runs": "runs/unfinished",
        }
    )
    (record,) = run_study(spec, tmp_path / "logs" / "unfinished.jsonl", progress=False)
    assert len(epochs) == 1  # only the second epoch was trained
    assert record.run_dir is not None and Path(record.run_dir).resolve() == cut.resolve()
    assert record.metrics["test_rmse"] == pytest.approx(whole.metrics["test_rmse"], abs=0)


def test_job_without_a_run_dir_repeats_as_before():
    job = Job("MF", {}, "final", {}, 0, "mf", ("train.seed=0",))
    assert job.command() == "embreg run mf --set train.seed=0"

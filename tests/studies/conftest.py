"""A tiny study on a slice of the real MovieLens-100k, run once per session and shared (read-only) by the tests."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from embreg.studies.runlog import RunRecord
from embreg.studies.spec import StudySpec, load_study
from tests.studies.study_helpers import write_study


@dataclass
class TinyStudy:
    spec: StudySpec
    study_file: Path
    log: Path
    records: list[RunRecord]

    def copy_log(self, to: Path) -> Path:
        to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.log, to)
        return to


@pytest.fixture(scope="session")
def tiny_study(tmp_path_factory) -> TinyStudy:
    from embreg.studies.runner import run_study

    folder = tmp_path_factory.mktemp("tiny-study")
    study_file = write_study(folder)
    spec = load_study(study_file)
    log = folder / "logs" / "tiny.jsonl"
    records = run_study(spec, log, progress=False)
    return TinyStudy(spec, study_file, log, records)

"""docs/adding-a-task.md's example task runs as the page shows it: its files, written into a folder of their own and
imported as the page says a task kept outside embreg is, train a run of the page's recipe on a slice of
MovieLens-100k whose metrics file holds the task's metrics."""

from __future__ import annotations

import json
import math
import re
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from embreg.registry import REGISTRY, load_builtins

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "adding-a-task.md"
FILE_BLOCK = re.compile(r"```(?:python|yaml)\n# file: (\S+)\n(.*?)```", flags=re.S)
SCRIPT = "train_rating_by_time.py"
SLICE = ["data.max_rows=5000", "train.epochs=1", "train.progress=false", "train.device=cpu"]


def page_files(text: str) -> dict[str, str]:
    """``{path: content}`` of the page's code blocks whose first line is ``# file: PATH``."""
    return {path: code for path, code in FILE_BLOCK.findall(text)}


def test_the_page_shows_every_file_of_the_task() -> None:
    assert set(page_files(PAGE.read_text())) == {
        "my_tasks/rating_by_time/evaluation.py",
        "my_tasks/rating_by_time/task.py",
        "my_tasks/rating_by_time/models.py",
        "rating-by-time.yaml",
        SCRIPT,
    }


@pytest.fixture
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry with embreg's own entries, in a copy that this test's registrations leave behind."""
    load_builtins()
    monkeypatch.setattr(REGISTRY, "_entries", {slot: dict(entries) for slot, entries in REGISTRY._entries.items()})
    yield
    for name in [m for m in sys.modules if m == "my_tasks" or m.startswith("my_tasks.")]:
        del sys.modules[name]


@pytest.mark.integration
@pytest.mark.usefixtures("isolated_registry")
def test_the_example_task_trains_as_the_page_shows_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for path, code in page_files(PAGE.read_text()).items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code)
    for package in ("my_tasks", "my_tasks/rating_by_time"):  # the page: empty __init__.py files
        (tmp_path / package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [SCRIPT, *SLICE])  # the page: KEY=VALUE arguments override the recipe

    runpy.run_path(SCRIPT, run_name="__main__")

    assert "rating-by-time" in REGISTRY.names("task") and "mf-by-time" in REGISTRY.names("model")
    run_dir = tmp_path / "runs" / "rating-by-time"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for name in ("val_rmse", "val_mae", "test_rmse", "test_mae"):
        assert math.isfinite(metrics[name]) and metrics[name] > 0, (name, metrics.get(name))
    assert metrics["epochs_run"] == 1
    split = json.loads((run_dir / "split.json").read_text())
    assert split["kind"] == "by-time" and sum(split["sizes"].values()) == 5000
    assert "sse-se" in (run_dir / "config.yaml").read_text()  # the page's recipe, with its index transform

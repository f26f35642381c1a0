"""compare: the task's headline metrics by default, every test metric with --all, warnings for mismatched runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from embreg.analysis.compare import compare_runs
from embreg.cli import main
from embreg.errors import ConfigError

RATING = {
    "best_epoch": 3,
    "val_rmse": 0.95,
    "test_rmse": 0.93,
    "test_mae": 0.73,
    "test_mse": 0.86,
    "test_mse_rare": 1.1,
    "wall_seconds": 12.0,
}
DATA = {"dataset": "ml-100k", "max_rows": None, "split": [0.8, 0.1, 0.1]}


def _run(
    folder: Path, metrics: dict, task: str = "rating", data: dict | None = None, split: dict | None = None
) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(metrics))
    (folder / "config.yaml").write_text(yaml.safe_dump({"name": folder.name, "task": task, "data": data or DATA}))
    (folder / "split.json").write_text(json.dumps(split or {"split_seed": 0, "sizes": {"train": 80}}))
    return folder


def test_headline_metrics_by_default_every_test_metric_with_all(tmp_path):
    a, b = _run(tmp_path / "mf", RATING), _run(tmp_path / "mf-sse", RATING)
    assert compare_runs([a, b], selection="headline").metrics == ["test_rmse", "test_mae"]
    assert compare_runs([a, b], selection="test").metrics == ["test_rmse", "test_mae", "test_mse", "test_mse_rare"]
    assert "wall_seconds" in compare_runs([a, b]).metrics  # the library's default stays every metric
    assert compare_runs([a, b], selection="headline", metrics=["val_rmse"]).metrics == ["val_rmse"]
    assert compare_runs([a, b], selection="headline").warnings == ()
    with pytest.raises(ConfigError, match="selection"):
        compare_runs([a, b], selection="some")  # type: ignore[arg-type]


def test_runs_without_a_config_show_their_test_metrics(tmp_path):
    a = tmp_path / "old"
    a.mkdir()
    (a / "metrics.json").write_text(json.dumps(RATING))
    assert compare_runs([a], selection="headline").metrics == ["test_rmse", "test_mae", "test_mse", "test_mse_rare"]


def test_runs_of_different_tasks_or_data_are_warned_about(tmp_path):
    base = _run(tmp_path / "mf", RATING)
    ranking = _run(tmp_path / "bpr", {"test_ndcg@10": 0.2, "test_hit@10": 0.5}, task="ranking")
    sliced = _run(tmp_path / "mf-small", RATING, data={**DATA, "max_rows": 2000})
    resplit = _run(tmp_path / "mf-other-split", RATING, split={"split_seed": 1, "sizes": {"train": 80}})
    result = compare_runs([base, ranking, sliced, resplit], selection="headline")
    assert result.metrics[:2] == ["test_rmse", "test_mae"] and "test_ndcg@10" in result.metrics
    tasks, data, split = result.warnings
    assert "different tasks" in tasks and "'ranking'" in tasks and "'rating'" in tasks
    assert "different data" in data and "data.max_rows" in data
    assert "different data" in split and "mf-other-split" in split


def test_the_cli_shows_the_headline_and_warns_on_stderr(tmp_path, capsys):
    a = _run(tmp_path / "mf", RATING)
    b = _run(tmp_path / "bpr", {"test_ndcg@10": 0.2, "test_rmse": 1.0}, task="ranking")
    assert main(["compare", str(a), str(b)]) == 0
    captured = capsys.readouterr()
    header = captured.out.splitlines()[0]
    assert "test_rmse" in header and "test_mae" in header and "test_mse_rare" not in header
    assert "wall_seconds" not in header
    assert captured.err.count("embreg: warning: runs of different tasks") == 1
    assert main(["compare", str(a), str(a), "--all"]) == 0
    captured = capsys.readouterr()
    assert "test_mse_rare" in captured.out.splitlines()[0] and captured.err == ""

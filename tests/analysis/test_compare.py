"""Tests of ``embreg.analysis.compare``: reading run directories, tests against a baseline, markdown rendering."""

import json
import math
from pathlib import Path

import pytest

from embreg.analysis.compare import CompareResult, MetricSummary, compare_runs, format_markdown
from embreg.analysis.stats import mann_whitney_u, summarize_runs, welch_t_test
from embreg.errors import ConfigError, DataError


def write_multi_seed(directory: Path, per_seed: list[dict[str, float]], **extra) -> Path:
    directory.mkdir(parents=True)
    summary = summarize_runs(per_seed)
    summary.update(extra)
    (directory / "summary.json").write_text(json.dumps(summary))
    return directory


def write_single_seed(directory: Path, metrics: dict) -> Path:
    directory.mkdir(parents=True)
    (directory / "metrics.json").write_text(json.dumps(metrics))
    return directory


BASE = [
    {"test_rmse": 0.93, "test_mae": 0.73},
    {"test_rmse": 0.94, "test_mae": 0.74},
    {"test_rmse": 0.95, "test_mae": 0.72},
]
SSE = [
    {"test_rmse": 0.90, "test_mae": 0.71},
    {"test_rmse": 0.91, "test_mae": 0.70},
    {"test_rmse": 0.905, "test_mae": 0.72},
]


def test_compare_multi_seed_runs_matches_stats(tmp_path: Path) -> None:
    base = write_multi_seed(tmp_path / "mf", BASE, seeds=[0, 1, 2])
    sse = write_multi_seed(tmp_path / "mf-sse", SSE)
    result = compare_runs([base, sse])

    assert [row.name for row in result.rows] == ["mf", "mf-sse"]
    assert result.metrics == ["test_rmse", "test_mae"]  # the "seeds" entry is not a metric
    assert result.baseline_row.name == "mf"
    assert result.rows[0].source == "summary.json"
    assert result.rows[0].p_values == {}

    rmse = result.rows[1].metrics["test_rmse"]
    assert rmse.n == 3
    assert rmse.mean == pytest.approx(0.905)
    assert rmse.std == pytest.approx(0.005)
    tests = result.rows[1].p_values["test_rmse"]
    base_values = [m["test_rmse"] for m in BASE]
    sse_values = [m["test_rmse"] for m in SSE]
    assert tests.welch == pytest.approx(welch_t_test(sse_values, base_values))
    assert tests.mann_whitney == pytest.approx(mann_whitney_u(sse_values, base_values))
    assert tests.welch < 0.05


def test_single_seed_runs_have_nan_p_values_and_skip_non_numeric(tmp_path: Path) -> None:
    a = write_single_seed(tmp_path / "a", {"test_rmse": 0.91, "epochs": 3, "note": "x", "flag": True, "h": {"a": 1}})
    b = write_single_seed(tmp_path / "b", {"test_rmse": 0.92, "epochs": 4})
    result = compare_runs([a, b], metrics=["test_rmse"])
    assert result.metrics == ["test_rmse"]
    assert result.rows[0].source == "metrics.json"
    assert result.rows[0].metrics["test_rmse"] == MetricSummary(0.91, 0.0, 1, (0.91,))
    tests = result.rows[1].p_values["test_rmse"]
    assert math.isnan(tests.welch) and math.isnan(tests.mann_whitney)
    assert compare_runs([a, b]).metrics == ["test_rmse", "epochs"]


def test_summary_json_wins_over_metrics_json(tmp_path: Path) -> None:
    run = write_multi_seed(tmp_path / "run", BASE)
    (run / "metrics.json").write_text(json.dumps({"test_rmse": 5.0}))
    row = compare_runs([run]).rows[0]
    assert row.source == "summary.json"
    assert row.metrics["test_rmse"].mean == pytest.approx(0.94)


def test_baseline_index_and_missing_metric_in_some_runs(tmp_path: Path) -> None:
    a = write_multi_seed(tmp_path / "a", BASE)
    b = write_multi_seed(tmp_path / "b", [{"test_rmse": 0.9}, {"test_rmse": 0.8}])
    result = compare_runs([a, b], baseline=1)
    assert result.baseline == 1 and result.baseline_row.name == "b"
    assert result.metrics == ["test_rmse", "test_mae"]  # baseline's metrics first
    assert "test_mae" not in result.rows[1].metrics
    assert math.isnan(result.rows[0].p_values["test_mae"].welch)
    assert not math.isnan(result.rows[0].p_values["test_rmse"].welch)


def test_duplicate_directory_names_fall_back_to_paths(tmp_path: Path) -> None:
    a = write_single_seed(tmp_path / "x" / "run", {"m": 1.0})
    b = write_single_seed(tmp_path / "y" / "run", {"m": 2.0})
    names = [row.name for row in compare_runs([a, b]).rows]
    assert names == [str(a), str(b)]


def test_format_markdown_table(tmp_path: Path) -> None:
    base = write_multi_seed(tmp_path / "mf", BASE)
    sse = write_multi_seed(tmp_path / "mf|sse", SSE)
    single = write_single_seed(tmp_path / "one", {"test_rmse": 0.9})
    text = format_markdown(compare_runs([base, sse, single], metrics=["test_rmse"]))
    lines = text.splitlines()
    assert lines[0] == "| run | test_rmse | p (Welch) | p (Mann-Whitney) | n |"
    assert lines[1] == "|---|---:|---:|---:|---:|"
    assert lines[2] == "| mf (baseline) | 0.9400 ± 0.0100 | — | — | 3 |"
    sse_cells = [c.strip() for c in lines[3].split(" | ")]
    assert sse_cells[0] == "| mf\\|sse"  # pipes in names are escaped
    assert sse_cells[1] == "0.9050 ± 0.0050"
    p = compare_runs([base, sse]).rows[1].p_values["test_rmse"]
    assert sse_cells[2] == ("<0.001" if p.welch < 0.001 else f"{p.welch:.3f}")
    assert sse_cells[3] == f"{p.mann_whitney:.3f}"
    assert lines[4] == "| one | 0.9000 | n/a | n/a | 1 |"
    assert "baseline `mf`" in text and text.endswith("\n")


def test_format_markdown_digits_and_missing_metric(tmp_path: Path) -> None:
    a = write_multi_seed(tmp_path / "a", BASE)
    b = write_single_seed(tmp_path / "b", {"test_rmse": 0.9})
    result: CompareResult = compare_runs([a, b])
    lines = format_markdown(result, digits=2).splitlines()
    assert lines[2].startswith("| a (baseline) | 0.94 ± 0.01 | — | — | 0.73 ± 0.01 |")
    assert lines[3] == "| b | 0.90 | n/a | n/a | — | — | — | 1 |"


def test_missing_directory_and_files_name_the_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"run directory not found: .*nowhere"):
        compare_runs([tmp_path / "nowhere"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=r"run directory .*empty' has neither summary.json .* nor metrics.json"):
        compare_runs([empty])


def test_malformed_files_raise_data_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "metrics.json").write_text('{"a": 1,\n')
    with pytest.raises(DataError, match=r"metrics.json' is not valid JSON \(line 2"):
        compare_runs([broken])
    listing = tmp_path / "listing"
    listing.mkdir()
    (listing / "summary.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="must hold a JSON object of metrics, got list"):
        compare_runs([listing])
    no_values = tmp_path / "no_values"
    no_values.mkdir()
    (no_values / "summary.json").write_text(json.dumps({"rmse": {"mean": 0.9, "std": 0.1}}))
    with pytest.raises(DataError, match="metric 'rmse' needs a non-empty list of numbers under 'values'"):
        compare_runs([no_values])
    no_metrics = write_single_seed(tmp_path / "no_metrics", {"note": "x"})
    with pytest.raises(DataError, match="none of the runs reports a numeric metric"):
        compare_runs([no_metrics])


def test_bad_arguments_raise_config_error(tmp_path: Path) -> None:
    run = write_multi_seed(tmp_path / "run", BASE)
    with pytest.raises(ConfigError, match="at least one run directory"):
        compare_runs([])
    with pytest.raises(ConfigError, match=r"baseline must be an index in \[0, 0\] .* got 1"):
        compare_runs([run], baseline=1)
    with pytest.raises(ConfigError, match=r"no run reports metric 'test_rmsee'; did you mean 'test_rmse'\?"):
        compare_runs([run], metrics=["test_rmsee"])

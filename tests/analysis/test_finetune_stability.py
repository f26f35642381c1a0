"""Stability tables over seeds (median, max, gap, p-values), box plots, and `embreg compare --full`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embreg.analysis.stability import box_plot, gap_metric, stability_markdown
from embreg.analysis.stats import welch_t_test
from embreg.cli import main


def _run(root: Path, name: str, test: list[float], gap: list[float]) -> Path:
    run = root / name
    run.mkdir()
    summary = {"test_accuracy": {"values": test}, "gap_accuracy": {"values": gap}}
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def test_table_has_median_max_gap_and_p_values(tmp_path: Path) -> None:
    ft = _run(tmp_path, "ft", [0.80, 0.84, 0.70, 0.82], [0.20, 0.10, 0.30, 0.20])
    lnsr = _run(tmp_path, "lnsr", [0.83, 0.85, 0.84, 0.86], [0.05, 0.05, 0.10, 0.00])
    table = stability_markdown([ft, lnsr], "test_accuracy", names=["FT", "LNSR"])
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    assert rows[0][0] == "| FT" and rows[0][3:6] == ["0.8100", "0.8400", "0.7000"]
    assert rows[0][6] == "0.2000" and rows[1][6] == "0.0500" and rows[0][7] == "(baseline)"
    assert rows[1][7] == f"{welch_t_test([0.83, 0.85, 0.84, 0.86], [0.80, 0.84, 0.70, 0.82]):.3f}"
    assert gap_metric("val_mcc") == "gap_mcc"


def test_box_plot_and_cli_full_output(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ft = _run(tmp_path, "ft", [0.80, 0.84, 0.70], [0.2, 0.1, 0.3])
    lnsr = _run(tmp_path, "lnsr", [0.83, 0.85, 0.84], [0.1, 0.1, 0.1])
    box_plot([ft, lnsr], "test_accuracy", tmp_path / "box.png", names=["FT", "LNSR"])
    assert (tmp_path / "box.png").stat().st_size > 1000
    assert (
        main(
            [
                "compare",
                str(ft),
                str(lnsr),
                "--metrics",
                "test_accuracy",
                "--full",
                "--boxplot",
                str(tmp_path / "cli.png"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "gap (gap_accuracy)" in out and "| lnsr | 0.8400 |" in out and (tmp_path / "cli.png").exists()


def test_size_curve_reports_mean_std_and_seeds_per_size(tmp_path: Path) -> None:
    from embreg.analysis.stability import size_curve

    runs = {
        "FT": {
            250: _run(tmp_path, "ft250", [0.70, 0.74], [0.3, 0.3]),
            1000: _run(tmp_path, "ft1000", [0.80, 0.84], [0.2, 0.2]),
        },
        "LNSR": {250: _run(tmp_path, "l250", [0.75, 0.75], [0.2, 0.2])},
    }
    points = size_curve(runs, "test_accuracy", tmp_path / "curve.png")
    assert points["FT"][1000][0] == pytest.approx(0.82) and points["FT"][250][2] == 2
    assert points["LNSR"][250][1] == 0.0 and (tmp_path / "curve.png").stat().st_size > 1000

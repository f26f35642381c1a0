"""benchmarks/md_speed.py --projected, run as its command line on a tiny table: the same-budget, same-output
baseline (one table at MD's parameter budget projected to the base dimension) is built to that budget and MD's
paired ratio against it is judged against 1.0x (the page docs/results/md-speed/ reads these fields)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "md_speed.py"


def run(tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "speed"
    subprocess.run(
        [
            sys.executable,
            str(BENCHMARK),
            "--rows",
            "3000",
            "--dim",
            "16",
            "--batch",
            "64",
            "--alpha",
            "0.3",
            "--blocks",
            "4",
            "--reps",
            "3",
            "--warmup",
            "1",
            "--memory-rows",
            "0",
            "--kernel",
            "auto",
            *extra,
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return json.loads(out.with_suffix(".json").read_text())


def test_projected_baseline_has_mds_budget_and_a_verdict_against_one(tmp_path):
    results = run(tmp_path, "--projected")["speed"]
    rows, dim = 3000, 16
    for sparse in (False, True):
        by_name = {r["layer"]: r for r in results if r["sparse"] == sparse}
        md = by_name["md"]
        p_dim = max(1, round(md["parameters"] / (rows + dim)))
        projected = by_name[f"projected@{p_dim}"]
        assert projected["dims"] == [p_dim] and projected["parameters"] == rows * p_dim + p_dim * dim
        paired = md["paired_vs_projected_same_budget"]
        assert paired["target"] == 1.0 and paired["rounds"] == 3
        assert paired["verdict"] in {"met", "at limit", "missed"} and paired["low"] <= paired["high"]


def test_without_projected_there_is_no_projected_row(tmp_path):
    results = run(tmp_path)["speed"]
    assert not any(r["layer"].startswith("projected") for r in results)
    assert not any("paired_vs_projected_same_budget" in r for r in results)

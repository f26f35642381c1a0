"""benchmarks/md_speed.py --projected: the same-budget, same-output baseline (one table at MD's parameter budget
projected to the base dimension) is built to that budget and MD's paired ratio against it is judged against
1.0x."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import md_speed  # noqa: E402


def test_projected_baseline_has_mds_budget_and_a_verdict_against_one():
    rows, dim = 3000, 16
    results = md_speed.speed(rows, dim, batch=64, alpha=0.3, blocks=4, exponent=1.05, reps=3, warmup=1,
                             loss=md_speed.Loss("sum"), projected=True)
    for sparse in (False, True):
        by_name = {r["layer"]: r for r in results if r["sparse"] == sparse}
        md = by_name["md"]
        p_dim = max(1, round(md["parameters"] / (rows + dim)))
        projected = by_name[f"projected@{p_dim}"]
        assert projected["dims"] == [p_dim] and projected["parameters"] == rows * p_dim + p_dim * dim
        paired = md["paired_vs_projected_same_budget"]
        assert paired["target"] == 1.0 and paired["rounds"] == 3
        assert paired["verdict"] in {"met", "at limit", "missed"} and paired["low"] <= paired["high"]


def test_without_projected_there_is_no_projected_row():
    results = md_speed.speed(1000, 8, batch=32, alpha=0.3, blocks=2, exponent=1.05, reps=2, warmup=1,
                             loss=md_speed.Loss("sum"))
    assert not any(r["layer"].startswith("projected") for r in results)
    assert not any("paired_vs_projected_same_budget" in r for r in results)

"""benchmarks/scale_memory.py and benchmarks/scale_mf_epoch.py, each run as its command line in ``--quick`` mode
into a temporary folder: the records, page and hub summary they write have the structure the results pages read
(timings are not checked; the memory counts are, since they are exact)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from embreg.studies.hub import read_summaries

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_script(name: str, *args: str) -> None:
    subprocess.run(
        [sys.executable, str(BENCHMARKS / name), "--quick", "--threads", "1", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )


def check_summary(folder: Path, name: str) -> dict:
    [(found, summary)] = read_summaries(folder.parent)
    assert found == folder.name
    assert summary["name"] == name and summary["kind"] == "benchmark" and summary["page"] == "README.md"
    for claim in summary["claims"]:
        assert set(claim) == {"claim", "reading", "verdict", "p"}
    return summary


def test_scale_memory_quick_counts_match_allocations(tmp_path):
    out = tmp_path / "results" / "scale-memory"
    run_script("scale_memory.py", "--out-dir", str(out))
    assert {p.name for p in out.iterdir()} == {"scale-memory.json", "scale-memory.png", "README.md", "summary.json"}
    result = json.loads((out / "scale-memory.json").read_text())
    rows, dims, alphas = result["meta"]["rows"], result["meta"]["base_dims"], result["meta"]["alphas"]
    records = {(r["rows"], r["base_dim"], r["layer"]): r for r in result["records"]}
    assert len(records) == len(rows) * len(dims) * (1 + len(alphas))
    for n in rows:
        for d in dims:
            uniform = records[(n, d, "uniform")]
            assert uniform["parameter_bytes"] == 4 * n * d and uniform["buffer_bytes"] == 0
            assert uniform["optimizer_bytes"]["sgd"] == 0
            assert uniform["optimizer_bytes"]["adam"] == 2 * 4 * n * d + 4  # two moments + the step counter
            for alpha in alphas:
                md = records[(n, d, f"md@{alpha:g}")]
                assert sum(md["block_rows"]) == n and max(md["block_dims"]) == d
                assert md["buffer_bytes"] >= 4 * n  # the int32 index map
                assert md["total_bytes"]["adam"] < uniform["total_bytes"]["adam"]
    assert len(result["ratios"]) == len(rows) * len(dims) * len(alphas)
    checked = [v for v in result["validation"] if "skipped" not in v]
    assert checked and all(v["counted_equals_allocated"] and v["dims_equal"] for v in checked)
    assert all(v.get("chunked_blocking_equals_library", True) for v in checked)
    page = (out / "README.md").read_text()
    assert "SYNTHETIC" in page and "![GiB against rows](scale-memory.png)" in page
    summary = check_summary(out, "scale-memory")
    assert summary["paper"] == "mixed-dimension-embeddings.txt" and summary["claims"]


def test_scale_mf_epoch_quick_writes_ratios_and_profile(tmp_path):
    out = tmp_path / "results" / "scale-mf-epoch"
    run_script("scale_mf_epoch.py", "--data-dir", str(tmp_path / "data"), "--out-dir", str(out))
    assert {p.name for p in out.iterdir()} == {"scale-mf-epoch-threads1.json", "README.md", "summary.json"}
    assert len(list((tmp_path / "data").glob("synthetic-*.parquet"))) == 1
    result = json.loads((out / "scale-mf-epoch-threads1.json").read_text())
    reps = result["meta"]["reps"]
    [record] = result["records"]
    assert record["synthetic"] and record["ratings"] == 20000
    assert record["train_rows"] < record["ratings"] and record["batches_per_epoch"] >= 1
    for key in ("epoch_wall_s", "epoch_cpu_s", "floor_wall_s", "floor_cpu_s", "paired_ratios_wall", "val_rmse"):
        assert len(record[key]) == reps, key
    assert record["ratio_wall"] > 0 and record["ratio_cpu"] > 0
    profile = result["profile"]
    assert profile["steps"] == record["batches_per_epoch"] and profile["top"]
    assert all(row["self_cpu_s"] >= 0 for row in profile["top"])
    page = (out / "README.md").read_text()
    assert "epoch / floor" in page and "Where an epoch's time goes" in page and "SYNTHETIC" in page
    summary = check_summary(out, "scale-mf-epoch")
    assert summary["claims"] == []  # the 3x target is claimed from 10^6 ratings on


def test_scale_mf_epoch_quick_sets_dense_sparse_and_fused_side_by_side(tmp_path):
    out = tmp_path / "results" / "scale-mf-epoch"
    run_script("scale_mf_epoch.py", "--sparse", "--fused", "--data-dir", str(tmp_path / "data"), "--out-dir", str(out))
    result = json.loads((out / "scale-mf-epoch-threads1.json").read_text())
    dense, sparse, fused = result["records"]
    assert (dense["variant"], sparse["variant"], fused["variant"]) == ("dense", "sparse", "fused")
    assert "embeddings.sparse=true" not in dense["overrides"]
    assert {"embeddings.sparse=true", "train.optimizer=sparse-adam"} <= set(sparse["overrides"])
    assert set(sparse["overrides"]) | {"train.fused_step=true"} == set(fused["overrides"])
    assert dense["train_rows"] == sparse["train_rows"] == fused["train_rows"] and fused["ratio_wall"] > 0
    for record in (sparse, fused):
        assert all(v is not None and v < 2.0 for v in record["val_rmse"])  # it trained
    assert fused["val_rmse"] == pytest.approx(sparse["val_rmse"], rel=1e-4)  # the same steps, fused
    assert result["profile"]["variant"] == "dense" and result["profile_sparse"]["variant"] == "sparse"
    assert "Optimizer.step#LazyAdam.step" in result["profile_sparse"]["inclusive_s"]
    page = (out / "README.md").read_text()
    assert "## The variants side by side" in page and "sparse / lazy Adam, fused step" in page
    check_summary(out, "scale-mf-epoch")

"""``benchmarks/gpu_step_cost.py``: its timing, ratios, pairs, tables and summary, and a quick CPU run of its MD part.

The benchmark itself needs CUDA; ``--accelerator cpu`` runs its code paths on the CPU (a check of the script only).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_step_cost.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(SCRIPT)


def test_interleaved_times_gives_one_value_per_timed_round_and_runs_the_warm_up(bench) -> None:
    calls = {"a": 0, "b": 0}

    def step(name: str):
        return lambda: calls.__setitem__(name, calls[name] + 1)

    cpu = torch.device("cpu")
    times = bench.interleaved_times({"a": (step("a"), cpu), "b": (step("b"), cpu)}, rounds=4, per_round=3)
    assert {k: len(v) for k, v in times.items()} == {"a": 4, "b": 4}
    assert calls == {"a": 15, "b": 15}  # 1 warm-up round + 4 timed rounds, 3 steps each
    assert all(t >= 0 for v in times.values() for t in v)


def test_paired_ratio_takes_the_median_of_per_round_ratios_and_judges_the_interval(bench) -> None:
    met = bench.paired_ratio([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], 1.05)
    assert met["median"] == 1.0 and met["verdict"] == "met"
    missed = bench.paired_ratio([2.0, 2.2, 2.1], [1.0, 1.0, 1.0], 1.05)
    assert missed["median"] == pytest.approx(2.1) and missed["verdict"] == "missed"
    assert bench._claim_verdict(met) == "met" and bench._claim_verdict(missed) == "not met"
    across = bench.paired_ratio([1.0, 1.1, 1.0, 1.1], [1.0] * 4, 1.05)
    assert across["verdict"] == "at limit" and bench._claim_verdict(across).startswith("untested")
    with pytest.raises(ValueError):
        bench.paired_ratio([1.0, 2.0], [1.0], None)  # rounds are paired one to one


def test_sse_pairs_repeat_the_mf_and_bpr_pairs_at_each_batch_size(bench) -> None:
    pairs = bench.sse_pairs([4096])
    assert set(bench.SSE_PAIRS) < set(pairs)
    extra = {k: v for k, v in pairs.items() if k not in bench.SSE_PAIRS}
    assert sorted(extra) == sorted(f"{k}, batch 4096" for k in bench.SSE_PAIRS if k.startswith(("MF", "BPR")))
    for recipe, overrides, base, base_overrides in extra.values():
        assert "train.batch_size=4096" in overrides and "train.batch_size=4096" in base_overrides
        assert recipe == base  # SSE against the same recipe at p = 0
    assert bench.sse_pairs([]) == bench.SSE_PAIRS


def test_a_skipped_family_is_a_row_of_the_table_with_its_reason(bench) -> None:
    record = {
        "machine": {"accelerator_type": "cuda", "cpu_threads": 4},
        "families": {"lstm-lm": {"recipe": "lm-dropout", "skipped": "needs gensim"}},
    }
    assert "| lstm-lm (lm-dropout) | skipped: needs gensim |" in bench.table(record)


def _run_md_part_on_the_cpu(bench, out: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> dict:
    """``main()`` of a tiny MD part on the CPU into ``out``; returns the record it wrote."""
    argv = [str(SCRIPT), "--accelerator", "cpu", "--parts", "md", "--md-rows", "2000", "--md-dim", "8", *extra]
    argv += ["--md-batch", "64", "--rounds", "1", "--steps", "1", "--cpu-threads", "1", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    threads = torch.get_num_threads()
    try:
        bench.main()
    finally:
        torch.set_num_threads(threads)
    return json.loads((out / "gpu-step-cost.json").read_text())


def test_the_md_part_runs_on_the_cpu_and_writes_its_record_and_summary(
    bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = _run_md_part_on_the_cpu(bench, tmp_path, monkeypatch)
    assert [(r["rows"], r["sparse"]) for r in record["md"]] == [(2000, False), (2000, True)]
    assert record["machine"]["gpu"] is None
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["kind"] == "benchmark" and len(summary["claims"]) == 2
    assert "MD / projected" in (tmp_path / "table.md").read_text()


def test_with_environment_sets_the_variable_for_the_step_only(bench, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBREG_SSE_KERNEL", "auto")
    seen = []
    step = bench.with_environment(lambda: seen.append(os.environ["EMBREG_SSE_KERNEL"]), "EMBREG_SSE_KERNEL", "off")
    step()
    assert seen == ["off"] and os.environ["EMBREG_SSE_KERNEL"] == "auto"
    monkeypatch.delenv("EMBREG_SSE_KERNEL")
    step()
    assert "EMBREG_SSE_KERNEL" not in os.environ


def test_the_sse_table_shows_both_placements_of_the_draws(bench) -> None:
    ratio = {"median": 1.02, "low": 1.0, "high": 1.04, "target": 1.05, "verdict": "met"}
    slow = {"median": 1.12, "low": 1.1, "high": 1.15, "target": 1.05, "verdict": "missed"}
    record = {
        "machine": {"accelerator_type": "cuda", "cpu_threads": 4},
        "sse": {
            "MF": {
                "batch_size": 512,
                "draws": "host",
                "backend": "triton",
                "ratio": ratio,
                "in_forward_ratio": slow,
                "median_ms": {"sse": 3.06, "base": 3.0, "sse in forward": 3.36, "base in forward": 3.0},
            },  # fmt: skip
            "older": {"batch_size": 512, "ratio": slow, "median_ms": {"sse": 3.36, "base": 3.0}},
        },
    }
    table = bench.table(record)
    assert (
        "| MF | 512 | host | 3.06 | 3.00 | 1.02x [1.00, 1.04] | <= 1.05 | met | 3.36 / 3.00 | 1.12x [1.10, 1.15] (triton) |"
        in table
    )
    assert "| older | 512 | in forward | 3.36 | 3.00 | 1.12x [1.10, 1.15] | <= 1.05 | missed | | |" in table


def test_update_keeps_the_parts_it_does_not_measure(bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    earlier = {"command": "earlier", "machine": {"accelerator_type": "cuda", "cpu_threads": 16}, "families": {}}
    (tmp_path / "gpu-step-cost.json").write_text(json.dumps(earlier))
    record = _run_md_part_on_the_cpu(bench, tmp_path, monkeypatch, "--update")
    assert "families" in record and len(record["md"]) == 2
    assert record["runs"]["families"]["command"] == "earlier"
    assert "--update" in record["runs"]["md"]["command"] and record["runs"]["md"]["machine"]["gpu"] is None


def test_asking_for_cuda_without_it_is_a_clear_error(bench, monkeypatch: pytest.MonkeyPatch) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--parts", "md"])
    with pytest.raises(SystemExit, match="needs CUDA"):
        bench.main()

"""Study pages: the tables of README.md, summary.json and its verdicts, analyses, the 300-line budget."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from embreg.registry import REGISTRY, Entry, load_builtins
from embreg.studies.report import MAX_LINES, NOT_REPRODUCED, OPPOSITE, REPRODUCED, write_report
from embreg.studies.runlog import RunRecord
from embreg.studies.sections import ClaimRow, Section
from embreg.studies.spec import StudySpec

BASE = [1.00, 1.01, 0.99, 1.00, 1.02]


def _final(
    variant: str, values: list[float], metric: str = "test_rmse", point: dict | None = None, setting: dict | None = None
) -> list[RunRecord]:
    machine = {"platform": "Linux", "processor": "x86_64", "cpus": 8, "torch": "2.4", "threads": 1, "gpu": None}
    return [
        RunRecord(
            "syn",
            variant,
            point or {},
            "final",
            setting or {},
            seed,
            [f"train.seed={seed}"],
            "mf",
            {metric: value},
            1.0,
            machine,
            f"2025-01-0{seed + 1}T00:00:00Z",
        )
        for seed, value in enumerate(values)
    ]


def _spec(**extra) -> StudySpec:
    data = {
        "name": "syn",
        "title": "Synthetic",
        "paper": "sse-stochastic-shared-embeddings.txt",
        "seeds": 5,
        "metrics": ["test_rmse"],
        "variants": {v: {"recipe": "mf"} for v in ("Base", "Better", "Worse", "Same")},
        "claims": [
            {"text": f"{v} beats Base", "metric": "test_rmse", "variant": v} for v in ("Better", "Worse", "Same")
        ],
    }
    data.update(extra)
    return StudySpec.from_mapping(data)


def test_the_tiny_study_page_has_claims_comparison_and_tuning(tiny_study, tmp_path):
    out = tmp_path / "tiny"
    summary = write_report(tiny_study.spec, tiny_study.records, out, command="embreg study run studies/tiny.yaml")
    text = (out / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) < 300
    assert lines[0] == "# Tiny MF study"
    for part in (
        "## Claims",
        "| claim | reading | verdict |",
        "dropout improves MF (Table 1)",
        "## Comparison",
        "| variant | n | test_rmse | Welch p | Mann-Whitney p | test_mae |",
        "| MF (baseline) | 2 |",
        "| MF-dropout | 2 |",
        "## Tuning",
        "| setting | mean val_rmse | n | |",
        "`model.l2=0.05`",
        "**chosen**",
        "## How it was run",
        "`embreg study run studies/tiny.yaml`",
        "2 final seeds",
        "two epochs only",
        "![test_rmse per variant](box-test_rmse.png)",
    ):
        assert part in text, part
    assert text.count("**chosen**") == 2  # one per variant
    assert (out / "box-test_rmse.png").stat().st_size > 1000
    assert json.loads((out / "summary.json").read_text()) == summary
    assert set(summary) == {"name", "title", "paper", "kind", "page", "claims", "seeds", "machine", "command"}
    assert (summary["kind"], summary["page"], summary["seeds"]) == ("study", "README.md", "2 per variant and point")
    claim = summary["claims"][0]
    assert claim["verdict"] in (REPRODUCED, OPPOSITE, NOT_REPRODUCED) and 0.0 <= claim["p"] <= 1.0
    assert (
        claim["reading"].startswith("MF-dropout ")
        and " vs MF " in claim["reading"]
        and "(n=2/2, Welch p=" in claim["reading"]
    )


def test_verdicts_reproduced_opposite_and_not_reproduced(tmp_path):
    records = (
        _final("Base", BASE)
        + _final("Better", [v - 0.1 for v in BASE[::-1]])
        + _final("Worse", [v + 0.1 for v in BASE[1:] + BASE[:1]])
        + _final("Same", [1.01, 1.0, 1.0, 1.02, 0.99])
    )
    summary = write_report(_spec(), records, tmp_path, command="embreg study run studies/syn.yaml")
    verdicts = {c["claim"]: c["verdict"] for c in summary["claims"]}
    assert verdicts == {
        "Better beats Base": REPRODUCED,
        "Worse beats Base": OPPOSITE,
        "Same beats Base": NOT_REPRODUCED,
    }
    better = summary["claims"][0]
    assert better["reading"] == "Better 0.9040 ± 0.0114 vs Base 1.0040 ± 0.0114 (n=5/5, Welch p=<0.001)"
    assert better["p"] < 0.05 and summary["claims"][2]["p"] > 0.05
    assert summary["machine"] == "8-core x86_64, torch 2.4"
    # a metric where higher is better turns the verdicts round
    flipped = _spec(
        claims=[{"text": "Better beats Base", "metric": "test_rmse", "variant": "Better", "direction": "max"}]
    )
    assert write_report(flipped, records, tmp_path / "f", command="c")["claims"][0]["verdict"] == OPPOSITE


def test_a_reading_without_significance_says_when_every_seed_lies_on_one_side(tmp_path):
    # Two seeds each: every seed of "Apart" is below (better than) every seed of the baseline, yet Welch's p > 0.05.
    records = _final("Base", [1.00, 1.10]) + _final("Apart", [0.98, 0.99]) + _final("Mixed", [0.99, 1.05])
    spec = _spec(
        variants={"Base": {"recipe": "mf"}, "Apart": {"recipe": "mf"}, "Mixed": {"recipe": "mf"}},
        claims=[
            {"text": "Apart beats Base", "metric": "test_rmse", "variant": "Apart"},
            {"text": "Mixed beats Base", "metric": "test_rmse", "variant": "Mixed"},
            {"text": "Apart loses to Base", "metric": "test_rmse", "variant": "Apart", "direction": "max"},
        ],
    )
    claims = write_report(spec, records, tmp_path, command="c")["claims"]
    assert [c["verdict"] for c in claims] == [NOT_REPRODUCED] * 3
    assert claims[0]["reading"].endswith("; every seed of the variant is better than every seed of the baseline)")
    assert "every seed" not in claims[1]["reading"]
    assert claims[2]["reading"].endswith("; every seed of the variant is worse than every seed of the baseline)")
    assert "every seed of the variant is better (or worse)" in (tmp_path / "README.md").read_text()


def test_the_one_sided_note_needs_two_seeds_a_side_and_no_tie():
    from embreg.studies.report import one_sided_note

    assert one_sided_note([0.9], [1.0, 1.1], "min") == ""
    assert one_sided_note([0.9, 1.0], [1.0, 1.1], "min") == ""  # a tie is an overlap
    assert (
        one_sided_note([1.2, 1.3], [1.0, 1.1], "max")
        == "every seed of the variant is better than every seed of the baseline"
    )


def test_a_claim_without_a_point_is_read_at_every_point(tmp_path):
    spec = _spec(
        variants={"Base": {"recipe": "mf"}, "Better": {"recipe": "mf"}},
        grid={"model.dim": [8, 16]},
        claims=[
            {"text": "Better beats Base", "metric": "test_rmse", "variant": "Better"},
            {"text": "at dim 16", "metric": "test_rmse", "variant": "Better", "point": {"model.dim": 16}},
        ],
    )
    records = []
    for dim, gain in ((8, 0.1), (16, 0.0)):
        records += _final("Base", BASE, point={"model.dim": dim})
        records += _final("Better", [v - gain for v in BASE[::-1]], point={"model.dim": dim})
    summary = write_report(spec, records, tmp_path, command="c")
    assert [c["verdict"] for c in summary["claims"]] == ["partly", NOT_REPRODUCED]
    assert summary["claims"][0]["reading"].startswith("model.dim=8: Better 0.9040")
    text = (tmp_path / "README.md").read_text()
    assert "### model.dim=8" in text and "### model.dim=16" in text


def test_no_final_runs_is_an_error(tmp_path):
    from embreg.errors import DataError

    with pytest.raises(DataError, match="no final runs"):
        write_report(_spec(), [], tmp_path, command="c")


@dataclass
class EchoConfig:
    word: str = "hello"


def _echo(config: EchoConfig, context) -> Section:
    (context.out_dir / "echo.png").write_bytes(b"png")
    n = len(context.final())
    return Section(
        "Echo",
        f"{config.word}: {n} final runs",
        figures=["echo.png"],
        claims=[ClaimRow("an analysis claim", f"{n} runs", REPRODUCED, 0.01)],
    )


def test_analyses_add_sections_figures_and_claims(tmp_path, monkeypatch):
    load_builtins()
    monkeypatch.setitem(
        REGISTRY._entries["analysis"],
        "test-echo",
        Entry("analysis", "test-echo", EchoConfig, _echo, "echo for the tests"),
    )
    spec = _spec(analyses=[{"name": "test-echo", "args": {"word": "bonjour"}}])
    records = _final("Base", BASE) + _final("Better", BASE)
    summary = write_report(spec, records, tmp_path, command="c")
    text = (tmp_path / "README.md").read_text()
    assert "## Echo\n\nbonjour: 10 final runs" in text and "![echo](echo.png)" in text
    assert summary["claims"][-1] == {
        "claim": "an analysis claim",
        "reading": "10 runs",
        "verdict": REPRODUCED,
        "p": 0.01,
    }


def _tuned(variant: str, settings: list[float], point: dict | None = None) -> list[RunRecord]:
    return [
        RunRecord("syn", variant, point or {}, "tune", {"model.l2": l2}, 0, [], "mf", {"val_rmse": 1 + abs(l2 - 0.3)})
        for l2 in settings
    ]


def test_long_tuning_tables_keep_the_best_ten(tmp_path):
    grid = [round(0.05 * i, 2) for i in range(15)]
    spec = _spec(
        variants={"Base": {"recipe": "mf"}},
        claims=[],
        seeds=2,
        tune={"method": "grid", "space": {"model.l2": grid}, "metric": "val_rmse"},
    )
    records = _tuned("Base", grid) + _final("Base", [1.0, 1.1], setting={"model.l2": 0.3})
    write_report(spec, records, tmp_path, command="c")
    text = (tmp_path / "README.md").read_text()
    assert "15 settings tried; the best 10 shown" in text
    rows = [line for line in text.splitlines() if line.startswith("| `model.l2=")]
    assert len(rows) == 10 and rows[0] == "| `model.l2=0.3` | 1.0000 | 1 | **chosen** |"


def test_a_large_grid_stays_under_300_lines(tmp_path):
    grid = {"model.dim": [4, 8, 16, 32, 64, 128], "train.lr": [0.001, 0.003, 0.01, 0.03, 0.1]}
    variants = {v: {"recipe": "mf"} for v in ("A", "B", "C")}
    spec = _spec(
        variants=variants,
        claims=[],
        grid=grid,
        seeds=2,
        tune={"method": "grid", "space": {"model.l2": [0.1, 0.2, 0.3, 0.4]}, "metric": "val_rmse"},
    )
    records = []
    for dim in grid["model.dim"]:
        for lr in grid["train.lr"]:
            point = {"model.dim": dim, "train.lr": lr}
            for v in variants:
                records += _tuned(v, [0.1, 0.2, 0.3, 0.4], point)
                records += _final(v, [1.0, 1.1], point=point, setting={"model.l2": 0.3})
    write_report(spec, records, tmp_path, command="c")
    lines = (tmp_path / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_LINES
    assert (tmp_path / "tuning.md").exists() and (tmp_path / "comparison.md").exists()
    assert "model.dim=128, train.lr=0.1" in (tmp_path / "comparison.md").read_text()
    assert Path(tmp_path / "box-test_rmse.png").exists()

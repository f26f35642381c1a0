"""The SASRec-vs-RecBole report reads both budgets from per-epoch curves, checks short against long runs and judges
the claims from the numbers (benchmarks/sasrec_vs_recbole_page.py), on synthetic per-seed JSONs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

PAGE = Path(__file__).resolve().parents[1] / "benchmarks" / "sasrec_vs_recbole_page.py"
MATCHED = {"max_len": 50, "hidden": 50, "layers": 2, "heads": 1, "dropout": 0.2, "lr": 1e-3, "batch_size": 128}
MACHINE = {"cpus": 2, "threads": 1, "platform": "test", "torch": "0"}
ORIGINAL = {"norm": "pre"}


@pytest.fixture(scope="module")
def page():
    return load_script(PAGE, "sasrec_vs_recbole_page")


def _run(seed: int, valid: list[float], test: list[float], model: dict | None = None) -> dict:
    curve = [
        {
            "epoch": e + 1,
            "seconds": 1.0,
            "train_loss": 5.0 - e - seed / 10,
            "valid": {m: v for m in METRICS},
            "test": {m: t + seed / 1000 for m in METRICS},
        }
        for e, (v, t) in enumerate(zip(valid, test))
    ]
    return {
        "seed": seed,
        "curve": curve,
        "model": model or ORIGINAL,
        "recbole_version": "1.2.1",
        "args": {"seed": seed},
    }


METRICS = ("ndcg@10", "hit@10", "mrr")


def _write(runs: Path, parts: list[str], seed: int, run: dict) -> None:
    folder = runs.joinpath(*parts)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"seed-{seed}.json").write_text(json.dumps(run))


def _report(page, runs: Path, out: Path, timing: dict | None = None) -> dict:
    if timing is not None:
        (runs / "timing.json").write_text(json.dumps(timing))
    page.write_report(
        runs,
        out,
        max_epochs=6,
        patience=2,
        short=3,
        matched=MATCHED,
        machine=MACHINE,
        descriptions={"original": "the original design"},
    )
    return json.loads((out / "sasrec-vs-recbole.json").read_text())


def test_budgets_come_from_the_best_validation_epoch_of_each_curve(page, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for seed in (0, 1):
        # RecBole: best valid at epoch 2 within 3 epochs, at epoch 5 overall
        _write(
            runs, ["recbole", "e6"], seed, _run(seed, [0.1, 0.3, 0.2, 0.2, 0.5, 0.4], [0.1, 0.2, 0.9, 0.9, 0.4, 0.9])
        )
        # embreg default: best at epoch 3 within 3 (ties keep the first), at epoch 6 overall
        _write(
            runs,
            ["embreg", "default", "e6"],
            seed,
            _run(seed, [0.1, 0.2, 0.3, 0.3, 0.3, 0.6], [0.1, 0.1, 0.3, 0.9, 0.9, 0.5]),
        )
        _write(runs, ["embreg", "original", "e3"], seed, _run(seed, [0.1, 0.2, 0.3], [0.1, 0.1, 0.3]))
        post_ln = _run(seed, [0.1, 0.2, 0.1], [0.1, 0.05, 0.3], model={"norm": "post"})
        _write(runs, ["embreg", "original+post-ln", "e3"], seed, post_ln)
    record = _report(page, runs, tmp_path / "out", timing=None)
    short, converged = record["readings"]["3 epochs"], record["readings"]["converged"]
    assert short["recbole"]["epoch"] == [2, 2] and converged["recbole"]["epoch"] == [5, 5]
    assert short["default"]["epoch"] == [3, 3] and converged["default"]["epoch"] == [6, 6]
    assert short["default"]["test"]["ndcg@10"] == pytest.approx(0.3005)
    assert short["original+post-ln"]["vs_original"]["difference"] == pytest.approx(0.05 - 0.3)
    # the default is the original design here: its long runs' first 3 epochs are compared with the original's
    # short runs (and not with post-LN's, another model)
    assert {(c["runs"], c["seed"], c["identical"]) for c in record["determinism"]} == {
        ("embreg original / default", 0, True),
        ("embreg original / default", 1, True),
    }
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    verdicts = [c["verdict"] for c in summary["claims"]]
    assert verdicts == ["met", "met", "untested"]  # 0.3005 >= 0.2005; 0.5005 >= 0.4005; no timing run
    text = (tmp_path / "out" / "README.md").read_text()
    assert "| tested epoch (best validation) | 2 | 2 | |" in text and "original+post-ln" in text
    # the default is chosen on validation: the original (0.3 at 3 epochs) beats post-LN (0.2), whatever test says
    assert short["original"]["valid_ndcg@10"] == pytest.approx(0.3)
    assert "`original` has the highest mean validation NDCG@10 (0.3000), and embreg's default model is that" in text
    assert (tmp_path / "out" / "valid-ndcg-curves.png").is_file()


def test_a_lower_mean_is_not_met_and_a_changed_short_run_is_caught(page, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for seed in (0, 1):
        _write(runs, ["recbole", "e6"], seed, _run(seed, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.5] * 6))
        _write(runs, ["recbole", "e3"], seed, _run(seed, [0.1, 0.2, 0.3 if seed else 0.31], [0.5] * 3))
        _write(runs, ["embreg", "default", "e6"], seed, _run(seed, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.4] * 6))
    timing = {
        "command": "timing",
        "started": "now",
        "epochs": 3,
        "host_note": "quiet",
        "loadavg_1min": {"start": 1.0, "end": 1.0},
        "embreg": {"train_seconds_per_epoch": [50, 52, 51]},
        "recbole": {"train_seconds_per_epoch": [80, 90, 85]},
    }
    record = _report(page, runs, tmp_path / "out", timing=timing)
    assert record["timing"]["ratio_embreg_over_recbole"] == pytest.approx(51 / 85)
    assert {(c["seed"], c["identical"]) for c in record["determinism"]} == {(0, False), (1, True)}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [c["verdict"] for c in summary["claims"]] == ["not met", "not met", "met"]
    assert "1 of 2 seeds" in (tmp_path / "out" / "README.md").read_text()
    # the page is written again from the record alone
    (tmp_path / "out" / "README.md").unlink()
    page.main(["--out", str(tmp_path / "out")])
    assert "not met" in (tmp_path / "out" / "README.md").read_text()


def test_the_validation_choice_says_when_the_default_is_another_design(page) -> None:
    entry = {"original": {"valid_ndcg@10": 0.10}, "original+init-normal": {"valid_ndcg@10": 0.12}, "recbole": {}}
    runs = {
        "original": {"e3": [{"model": {"init_std": None}}]},
        "original+init-normal": {"e3": [{"model": {"init_std": 0.02}}]},
        "default": {"e50": [{"model": {"init_std": None}}]},
    }
    record = {"readings": {"3 epochs": entry}, "runs": {"embreg": runs}}
    choice = page.default_choice(record, "3 epochs")
    assert choice.startswith("`original+init-normal` has the highest mean validation NDCG@10 (0.1200)")
    assert choice.endswith("the default is another design.")
    runs["default"] = {"e50": [{"model": {"init_std": 0.02}}]}
    assert page.default_choice(record, "3 epochs").endswith("embreg's default model is that design.")

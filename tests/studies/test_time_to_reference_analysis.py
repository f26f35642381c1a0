"""Analysis ``time-to-reference`` and the one-sample test against a deterministic (``method``) row on a study page."""

from __future__ import annotations

from pathlib import Path

import pytest

from embreg.analysis.stats import one_sample_t_test, welch_t_test
from embreg.studies.report import judge, p_value, write_report
from embreg.studies.runlog import RunRecord
from embreg.studies.spec import StudySpec

LEXICON = "Lexicon"


def _spec() -> StudySpec:
    return StudySpec.from_mapping(
        {
            "name": "budget",
            "title": "t",
            "paper": "sse-stochastic-shared-embeddings.txt",
            "variants": {
                "Transformer": {"recipe": "translation"},
                LEXICON: {"recipe": "translation", "method": "lexicon"},
            },
            "baseline": LEXICON,
            "seeds": 3,
            "metrics": ["test_bleu", "val_bleu"],
            "claims": [{"text": "beats the lexicon", "metric": "test_bleu", "variant": "Transformer"}],
            "analyses": [{"name": "time-to-reference", "args": {"metric": "val_bleu"}}],
        }
    )


def _records() -> list[RunRecord]:
    records = [
        RunRecord("budget", LEXICON, {}, "final", {}, 0, [], "translation", {"val_bleu": 9.0, "test_bleu": 13.0})
    ]
    for seed in range(3):
        curve = [4.0 + seed / 10, 8.0 + seed / 10, 10.0 + seed / 10]
        metrics = {
            "test_bleu": 14.0 + seed / 5,
            "val_bleu": curve[-1],
            "train_seconds": 5400.0,
            "seconds_per_step": 0.5,
            "epochs_run": 3,
            "history": {"val_bleu": curve, "seconds": [1800.0] * 3},
        }
        records.append(RunRecord("budget", "Transformer", {}, "final", {}, seed, [], "translation", metrics))
    return records


def test_the_page_shows_when_the_trained_variant_passes_the_reference(tmp_path: Path) -> None:
    summary = write_report(_spec(), _records(), tmp_path, command="embreg study run budget.yaml")
    page = (tmp_path / "README.md").read_text()
    assert "**Transformer** passes it after epoch 3 (10,800 steps, 1.50 h)" in page
    assert "| 2 | 7,200 | 1.00 | 8.10 |" in page  # epoch, steps, hours, mean val_bleu over the seeds
    assert (tmp_path / "budget-time-to-reference.png").is_file()
    claim = summary["claims"][0]
    assert claim["verdict"] == "reproduced" and "one-sample t-test p" in claim["reading"]
    assert claim["p"] == pytest.approx(one_sample_t_test([14.0, 14.2, 14.4], 13.0))
    lexicon_row = next(line for line in page.splitlines() if line.startswith(f"| {LEXICON} (baseline) | 1 |"))
    assert "13.0000" in lexicon_row


def test_a_reference_never_passed_is_said_so(tmp_path: Path) -> None:
    records = _records()
    records[0].metrics["val_bleu"] = 50.0
    write_report(_spec(), records, tmp_path, command="c")
    assert "does not pass it in 3 epochs" in (tmp_path / "README.md").read_text()


def test_p_value_uses_the_one_sample_test_only_against_a_fixed_single_value() -> None:
    seeds = [12.1, 12.4, 12.3]
    assert p_value(seeds, [11.0], fixed=True) == one_sample_t_test(seeds, 11.0)
    assert p_value([11.0], seeds, fixed=True) == one_sample_t_test(seeds, 11.0)
    assert p_value(seeds, [11.0, 11.2], fixed=False) == welch_t_test(seeds, [11.0, 11.2])
    assert judge(seeds, [11.0], "max")[0].startswith("untested")  # Welch needs two values a side
    assert judge(seeds, [11.0], "max", fixed=True)[0] == "reproduced"

"""The lm-learning-curves analysis against direct computations on hand-made run records."""

import statistics
from pathlib import Path

from embreg.studies import AnalysisContext, RunRecord, StudySpec
from embreg.studies.analyses.lm_learning_curves import LMCurvesConfig, build, median_seconds, value_at


def _record(variant, seed, curve, seconds):
    best = min(range(len(curve)), key=curve.__getitem__)
    return RunRecord(
        "s",
        variant,
        {},
        "final",
        {},
        seed,
        [],
        "lm-dropout",
        {
            "val_ppl": curve[best],
            "test_ppl": curve[best] / 1.5,
            "best_epoch": best,
            "epochs_run": len(curve),
            "history": {"val_ppl": curve, "seconds": seconds},
        },
    )


RUNS = [
    _record("Dropout_1", 0, [300.0, 220.0, 200.0, 210.0], [10.0, 14.0, 11.0, 50.0]),
    _record("Dropout_1", 1, [310.0, 205.0, 207.0], [12.0, 12.0, 13.0]),
    _record("Dropout_2", 0, [305.0, 230.0], [20.0, 22.0]),
    _record("Dropout_2", 1, [290.0, 240.0, 215.0], [21.0, 25.0, 30.0]),
]


def test_helpers():
    assert value_at(RUNS[0], "val_ppl", 4) == 210.0 and value_at(RUNS[2], "val_ppl", 3) is None
    assert median_seconds(RUNS[0]) == statistics.median([10.0, 14.0, 11.0, 50.0])


def test_build(tmp_path: Path):
    spec = StudySpec.from_mapping(
        {
            "name": "s",
            "title": "t",
            "paper": "p",
            "metrics": ["val_ppl"],
            "seeds": 2,
            "variants": {
                "Dropout_1": {"recipe": "lm-dropout"},
                "Dropout_2": {"recipe": "lm-dropout-k", "set": ["objective.k=2"]},
            },
        }
    )
    section = build(LMCurvesConfig(epochs=[1, 3]), AnalysisContext(spec, RUNS, tmp_path))
    assert (tmp_path / section.figures[0]).is_file()
    text = section.markdown
    assert "| Dropout_1 | 0 | 4 | 3 | 200.0 | 133.3 | 12.5 |" in text  # best epoch from 1, median s/epoch 12.5
    assert "| Dropout_2 | 0 | 305.0 | - | 230.0 (2) |" in text
    assert f"| Dropout_1 | 200.0 | 205.0 | **{statistics.fmean([200.0, 205.0]):.1f}** |" in text


def test_digits_set_the_tables_precision(tmp_path: Path):
    spec = StudySpec.from_mapping(
        {
            "name": "s",
            "title": "t",
            "paper": "p",
            "metrics": ["val_ppl"],
            "variants": {"Dropout_1": {"recipe": "lm-dropout"}},
        }
    )
    runs = [r for r in RUNS if r.variant == "Dropout_1" and r.seed == 0]
    text = build(LMCurvesConfig(epochs=[1], digits=3), AnalysisContext(spec, runs, tmp_path)).markdown
    assert "| 200.000 |" in text and "| 200.0 |" not in text

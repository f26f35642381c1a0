"""The finetune-stability analysis against direct computations on hand-made run records."""

import statistics
from pathlib import Path

import pytest
from scipy import stats as scipy_stats

from embreg.studies import AnalysisContext, RunRecord, StudySpec
from embreg.studies.analyses.finetune_stability import (
    FinetuneStabilityConfig,
    brown_forsythe,
    build,
    by_variant,
    direction_row,
    stability_table,
)

FT = [0.60, 0.62, 0.58, 0.61]
LNSR = [0.63, 0.64, 0.62, 0.66]
GAP = [0.2, 0.1, 0.3, 0.2]


def _records():
    out = []
    for variant, values in (("FT", FT), ("LNSR", LNSR)):
        for seed, value in enumerate(values):
            out.append(
                RunRecord(
                    "s",
                    variant,
                    {},
                    "final",
                    {},
                    seed,
                    [f"train.seed={seed}"],
                    "ft-reviews",
                    {"test_mcc": value, "gap_mcc": GAP[seed]},
                )
            )
    out.append(RunRecord("s", "FT", {}, "tune", {"x": 1}, 0, [], "ft-reviews", {"test_mcc": 0.0}))
    return out


def _spec():
    return StudySpec.from_mapping(
        {
            "name": "s",
            "title": "t",
            "paper": "p",
            "metrics": ["test_mcc"],
            "variants": {"FT": {"recipe": "ft-reviews"}, "LNSR": {"recipe": "ft-reviews-lnsr"}},
        }
    )


def test_table_matches_direct_computation():
    runs = by_variant(_records(), ["FT", "LNSR"])
    assert runs["FT"][0]["test_mcc"] == 0.60  # the tuning record is not a final run
    row = stability_table(runs, "test_mcc", "FT").splitlines()[3].split(" | ")
    assert row[1] == "4"
    assert row[2] == f"{statistics.fmean(LNSR):.4f}" and row[3] == f"{statistics.stdev(LNSR):.4f}"
    assert row[4] == f"{statistics.median(LNSR):.4f}" and row[5] == f"{max(LNSR):.4f}" and row[6] == f"{min(LNSR):.4f}"
    assert row[7] == f"{statistics.fmean(GAP):.4f}"
    welch = scipy_stats.ttest_ind(LNSR, FT, equal_var=False).pvalue
    assert row[8] == f"{welch:.3f}"
    mw = scipy_stats.mannwhitneyu(LNSR, FT, alternative="two-sided").pvalue
    assert row[9] == f"{mw:.3f}"
    assert row[10].rstrip(" |") == f"{scipy_stats.levene(LNSR, FT, center='median').pvalue:.3f}"


def test_brown_forsythe_and_direction():
    assert brown_forsythe([1.0], [1.0, 2.0]) != brown_forsythe([1.0], [1.0, 2.0])  # NaN
    runs = by_variant(_records())
    row = direction_row(runs, "test_mcc", "FT", "LNSR")
    assert row.seeds == [0, 1, 2, 3]
    assert row.mean == pytest.approx((statistics.fmean(LNSR), statistics.fmean(FT)))
    assert row.std == pytest.approx((statistics.stdev(LNSR), statistics.stdev(FT)))
    assert row.verdict == ("holds" if statistics.stdev(LNSR) <= statistics.stdev(FT) else "mean only")


def test_build_writes_figure_and_claims(tmp_path: Path):
    config = FinetuneStabilityConfig(
        metrics=["test_mcc"], check_metrics=["test_mcc"], baseline="FT", method="LNSR", box_metric="test_mcc"
    )
    section = build(config, AnalysisContext(_spec(), _records(), tmp_path))
    assert section.figures and (tmp_path / section.figures[0]).is_file()
    assert "| LNSR | 4 |" in section.markdown
    assert len(section.claims) == 1 and section.claims[0].p == pytest.approx(
        scipy_stats.levene(LNSR, FT, center="median").pvalue
    )

"""The size-curve analysis against direct computations on hand-made run records."""

import statistics
from pathlib import Path

import pytest

from embreg.studies import AnalysisContext, RunRecord, StudySpec
from embreg.studies.analyses.size_curve import SizeCurveConfig, build, curve_points

VALUES = {("FT", 250): [0.1, 0.2, 0.4], ("FT", 1000): [0.6, 0.62], ("LNSR", 250): [0.3, 0.3, 0.33]}


def _records():
    return [
        RunRecord("s", v, {"data.train_size": n}, "final", {}, seed, [], "r", {"test_mcc": x})
        for (v, n), xs in VALUES.items()
        for seed, x in enumerate(xs)
    ]


def test_points_match_direct_computation():
    points = curve_points(_records(), "data.train_size", "test_mcc")
    for (variant, size), xs in VALUES.items():
        mean, std, n = points[variant][size]
        assert mean == pytest.approx(statistics.fmean(xs)) and std == pytest.approx(statistics.stdev(xs))
        assert n == len(xs)
    assert 1000 not in points["LNSR"]


def test_build_table_and_difference(tmp_path: Path):
    spec = StudySpec.from_mapping(
        {
            "name": "s",
            "title": "t",
            "paper": "p",
            "metrics": ["test_mcc"],
            "variants": {"FT": {"recipe": "ft-reviews"}, "LNSR": {"recipe": "ft-reviews-lnsr"}},
            "grid": {"data.train_size": [250, 1000]},
        }
    )
    section = build(SizeCurveConfig(), AnalysisContext(spec, _records(), tmp_path))
    assert (tmp_path / section.figures[0]).is_file()
    diff = statistics.fmean(VALUES[("LNSR", 250)]) - statistics.fmean(VALUES[("FT", 250)])
    assert f"250: {diff:+.4f}" in section.markdown
    assert "| LNSR | 0.3100 ± 0.0173 (3) | — |" in section.markdown

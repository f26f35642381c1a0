"""What a study report is made of: sections (markdown + figures) and the claim rows the results hub shows.

An analysis (registry slot ``analysis``) is ``build(config, context: AnalysisContext) -> Section``; the report
puts its sections after the standard comparison table, and the hub lists its claim rows under the study's paper.

Example:
    >>> Section("Budget curve", "| a | b |", figures=["curve.png"]).figures
    ['curve.png']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ClaimRow", "Section", "AnalysisContext"]


@dataclass
class ClaimRow:
    """One line of the results hub.

    Attributes:
        claim: the paper's claim in words (with its table/figure/equation).
        reading: what this study measured, with numbers (mean ± std, n, p).
        verdict: ``reproduced``, ``not reproduced``, ``partly`` or ``opposite``.
        p: the deciding p-value (NaN when none applies).
    """

    claim: str
    reading: str
    verdict: str
    p: float = float("nan")


@dataclass
class Section:
    """A titled block of a study page; ``figures`` are file names written into the page's folder."""

    title: str
    markdown: str
    figures: list[str] = field(default_factory=list)
    claims: list[ClaimRow] = field(default_factory=list)


@dataclass
class AnalysisContext:
    """What an analysis reads.

    Attributes:
        spec: the study (:class:`embreg.studies.spec.StudySpec`).
        records: every run of its log (:class:`embreg.studies.runlog.RunRecord`), tuning and final.
        out_dir: the study page's folder (figures go here).
    """

    spec: Any
    records: list[Any]
    out_dir: Path

    def final(self) -> list[Any]:
        return [r for r in self.records if r.phase == "final"]

    def tuning(self) -> list[Any]:
        return [r for r in self.records if r.phase == "tune"]

"""Studies: recipes x override grid x seeds, tuned on the validation split with one budget, resumable from a run
log, reported as pages of ``docs/results`` and one generated hub (``docs/results/README.md``).

* :mod:`~embreg.studies.spec`: the study file.
* :mod:`~embreg.studies.runlog`: one JSON line per finished run.
* :mod:`~embreg.studies.sections`: report sections, claim rows and the analysis context.
* :mod:`~embreg.studies.analyses`: registered analyses (extra tables and plots).
* :mod:`~embreg.studies.runner`: ``run_study`` (tuning on validation, final seeds, resume, parallel workers).
* :mod:`~embreg.studies.report`: a study's page from its log; :mod:`~embreg.studies.hub`: the results hub.
* :mod:`~embreg.studies.cli`: ``embreg study run|report|hub``.

Example:
    >>> from embreg.studies import load_study
    >>> spec = load_study("studies/sse-bpr.yaml")  # doctest: +SKIP
"""

from embreg.studies.runlog import RunLog, RunRecord
from embreg.studies.sections import AnalysisContext, ClaimRow, Section
from embreg.studies.spec import StudySpec, load_study

__all__ = ["AnalysisContext", "ClaimRow", "RunLog", "RunRecord", "Section", "StudySpec", "load_study"]

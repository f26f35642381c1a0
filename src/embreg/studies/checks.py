"""Checks of a study's metric names against what its variants' tasks report, made before any run trains.

Every name a study reads from its runs must be one the variant's task reports (``adapter.metric_names(recipe)``,
:mod:`embreg.tasks`): each of ``metrics`` for every variant, a claim's ``metric`` for its variant and its
baseline, and ``tune.metric`` for every tuned variant. A misspelt name would otherwise train every run and leave the
page's cell empty or the claim "not run"; here it is a :class:`~embreg.errors.ConfigError` naming the closest valid
name.

Example:
    >>> from embreg.recipes import load_recipe
    >>> from embreg.studies.spec import StudySpec
    >>> spec = StudySpec.from_mapping({"name": "d", "title": "t", "paper": "p", "variants": {"MF": {"recipe": "mf"}},
    ...                                "metrics": ["test_rmes"]})
    >>> check_study_metrics(spec, {"MF": load_recipe("mf")})
    Traceback (most recent call last):
    ...
    embreg.errors.ConfigError: study d: metrics: 'test_rmes' is not a metric of variant 'MF' (recipe mf, ...); did you mean 'test_rmse'? ...
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from embreg.errors import ConfigError
from embreg.studies.spec import StudySpec

__all__ = ["check_study_metrics", "check_method_metrics"]


def _check_one(spec: StudySpec, where: str, metric: str, variant: str, recipe: Any) -> None:
    names = list(recipe.adapter.metric_names(recipe))
    if metric in names:
        return
    close = difflib.get_close_matches(metric, names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(
        f"study {spec.name}: {where}: {metric!r} is not a metric of variant {variant!r} (recipe {recipe.name}, "
        f"task {recipe.task}){hint} Its runs report: {', '.join(names)}"
    )


def check_study_metrics(spec: StudySpec, recipes: Mapping[str, Any]) -> None:
    """Refuses a metric name of ``spec`` that a variant's task does not report.

    Args:
        spec: the study.
        recipes: variant label -> its loaded recipe (a variant missing here runs nowhere and is not checked).

    Raises:
        ConfigError: the first unknown name, where the study uses it, the variant, and the closest valid name.
    """
    for metric in spec.metrics:
        for variant, recipe in recipes.items():
            _check_one(spec, "metrics", metric, variant, recipe)
    for index, claim in enumerate(spec.claims):
        for label in (claim.variant, claim.baseline or spec.baseline):
            if label is not None and label in recipes:
                _check_one(spec, f"claims[{index}] ({claim.text!r})", claim.metric, label, recipes[label])
    if spec.tune is not None and spec.tune.metric is not None:
        for variant, recipe in recipes.items():
            _check_one(spec, "tune.metric", spec.tune.metric, variant, recipe)


def check_method_metrics(spec: StudySpec, variant: str) -> None:
    """Refuses a claim or ``tune.metric`` reading a metric that a ``method`` variant (a non-neural baseline,
    :mod:`embreg.recipes.baselines`) does not report. ``metrics`` may name others (the trained variants' own): the
    baseline's row shows "—" there.

    Raises:
        ConfigError: naming the claim, the metric and what the baseline reports.
    """
    from embreg.registry import REGISTRY

    method = spec.variants[variant].method
    names = list(REGISTRY.get("baseline", str(method)).extra.get("metrics", ()))
    for index, claim in enumerate(spec.claims):
        if variant in (claim.variant, claim.baseline or spec.baseline) and claim.metric not in names:
            raise ConfigError(
                f"study {spec.name}: claims[{index}] ({claim.text!r}) reads {claim.metric!r} of variant {variant!r}, "
                f"which the baseline {method!r} does not report; it reports: {', '.join(names)}"
            )

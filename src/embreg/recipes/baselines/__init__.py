"""Non-neural baselines: a reference system learnt and scored on a recipe's own data split, without training.

A baseline is registered in the ``baseline`` slot of :mod:`embreg.registry` with its typed config; its builder
``build(config, recipe) -> BaselineResult`` reads the recipe's ``data`` section (the pairs, their split and their
subsets, exactly as the recipe's task prepares them) and reports metrics under the task's names (``test_bleu``,
``test_chrf``, ...), so a study shows it as one more row beside the trained variants (``variants: {Lexicon:
{recipe: translation, method: lexicon}}``, :mod:`embreg.studies.spec`) and ``embreg baseline NAME RECIPE`` runs it
on a user's own data.

Options: ``baseline.<field>=value`` strings set the baseline's config (``baseline.iterations=10``); every other
override goes to the recipe.

Example:
    >>> from embreg.registry import REGISTRY
    >>> entry = REGISTRY.get("baseline", "lexicon")
    >>> entry.extra["tasks"], split_options(["data.min_words=1", "baseline.iterations=3"])
    (('translation',), (['data.min_words=1'], ['iterations=3']))
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from embreg.errors import ConfigError

__all__ = ["BaselineResult", "OPTION_PREFIX", "split_options", "baseline_config", "run_baseline"]

OPTION_PREFIX = "baseline."
"""Overrides with this prefix set the baseline's config; the others the recipe's."""


@dataclass
class BaselineResult:
    """What a baseline reports.

    Attributes:
        metrics: metric name -> value, named as the recipe's task names them (``test_bleu``, ...).
        record: what it was learnt on (the split's counts, sizes), for ``split.json``-like records.
        outputs: per evaluated split, rows a user can read (``{"test": [{"source", "reference", "output"}]}``).
    """

    metrics: dict[str, float]
    record: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, list[dict[str, str]]] = field(default_factory=dict)


def split_options(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(recipe overrides, baseline options)``: ``baseline.x=v`` become ``x=v``; the rest stay as they are."""
    recipe, options = [], []
    for override in overrides:
        if override.startswith(OPTION_PREFIX):
            options.append(override[len(OPTION_PREFIX) :])
        else:
            recipe.append(override)
    return recipe, options


def baseline_config(name: str, options: Sequence[str]) -> Any:
    """The config of baseline ``name`` with ``key=value`` ``options`` applied (unknown keys refused).

    Raises:
        ConfigError: an unknown baseline (naming the closest), an unknown option or a bad value.
    """
    from embreg.config import apply_overrides, from_dict
    from embreg.registry import REGISTRY

    entry = REGISTRY.get("baseline", name)
    return from_dict(entry.config, apply_overrides({}, list(options)), path="baseline")


def run_baseline(name: str, recipe: Any, options: Sequence[str] = ()) -> BaselineResult:
    """Learns and scores baseline ``name`` on ``recipe``'s data; ``metrics`` gains ``wall_seconds``.

    Raises:
        ConfigError: an unknown baseline or option, or a recipe whose task the baseline does not serve.
    """
    from embreg.registry import REGISTRY

    entry = REGISTRY.get("baseline", name)
    tasks = entry.extra.get("tasks", ())
    if recipe.task not in tasks:
        raise ConfigError(
            f"baseline {name!r} serves task(s) {', '.join(tasks)}; recipe {recipe.name!r} is a {recipe.task!r} recipe"
        )
    config = baseline_config(name, options)
    began = time.perf_counter()
    result: BaselineResult = entry.build(config, recipe)
    result.metrics["wall_seconds"] = time.perf_counter() - began
    return result

"""The study file: which recipes, which override grid, how many seeds, how tuning is done, which claims are checked.

A study is a YAML file under ``studies/`` (one per reading shown in ``docs/results``):

```yaml
name: sse-bpr                         # also the name of its run log and of its page docs/results/<name>/
title: SSE on BPR, MovieLens-100k
paper: sse-stochastic-shared-embeddings.txt
dataset: MovieLens-100k (per-user 80/10/10 split, seed 0)
variants:                             # label -> a recipe and its own overrides; the first is the baseline
  BPR: {recipe: bpr}
  SSE-SE + BPR: {recipe: bpr-sse-se}
  # a non-neural row on the recipe's data (translation): {recipe: translation, method: lexicon}
common: [train.progress=false, train.threads=1]   # overrides of every run
grid: {}                              # reported axes: every combination is a point of its own (e.g. budget x alpha)
exclude: []                           # points some variants skip: {variants: [...], point: {axis: value}}
tune:                                 # chosen per variant and point on the validation split, same budget for all
  method: grid                        # required: grid (every combination of `space`) or optuna (`trials` TPE trials)
  space: {model.l2: [0.01, 0.03, 0.1]}
  seeds: 1                            # tuning seeds: the choice is the best mean validation value
seeds: 10                             # final seeds of the chosen setting (seed_start, seed_start + 1, ...)
keep_runs: null                       # a folder: final runs stay there as run dirs <folder>/<variant slug>/seed-<s>
metrics: [test_precision@1, test_precision@10]
claims:                               # the paper's claims this study checks, each against the baseline
  - {text: "SSE-SE improves BPR (Table 1)", metric: test_precision@1, variant: SSE-SE + BPR}
analyses: []                          # registered analyses adding tables and plots ({name: ..., ...args})
```

With ``keep_runs`` set, the final runs (not the tuning runs) are kept as ordinary run directories that a later
study (``model.pretrained=<run dir>``) or ``embreg predict`` can use (:mod:`embreg.studies.kept`).

Every run of a study lands as one line of its run log (:mod:`embreg.studies.runlog`); reports and the results hub
are made from the logs alone, so a report never needs training and an interrupted study resumes where it stopped.

Example:
    >>> spec = StudySpec.from_mapping({"name": "demo", "title": "t", "paper": "p.txt", "variants": {"MF": {"recipe": "mf"}},
    ...                                "metrics": ["test_rmse"]})
    >>> spec.baseline, spec.seeds, spec.tune is None
    ('MF', 5, True)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from embreg.config import from_dict, load_yaml
from embreg.errors import ConfigError

__all__ = [
    "VariantSpec",
    "TuneSpec",
    "ClaimSpec",
    "ExcludeSpec",
    "AnalysisSpec",
    "StudySpec",
    "load_study",
    "grid_points",
    "point_overrides",
    "check_analyses",
]


@dataclass
class VariantSpec:
    """One compared configuration: a shipped recipe (or YAML path) and overrides of its own.

    Attributes:
        recipe: a shipped recipe name or a YAML file.
        set: this variant's overrides.
        method: a registered non-neural baseline (``embreg list``: baselines, e.g. ``lexicon``) learnt and scored on
            the recipe's data instead of training the recipe (:mod:`embreg.recipes.baselines`); ``baseline.KEY=VALUE``
            entries of ``set`` are its options. It is deterministic, so it runs once (seed ``seed_start``) and is never
            tuned; its row shows the metrics it reports and "—" for the others.
    """

    recipe: str
    set: list[str] = field(default_factory=list)
    method: str | None = None

    def __post_init__(self) -> None:
        if self.method is not None:
            from embreg.recipes.baselines import baseline_config, split_options

            baseline_config(self.method, split_options(self.set)[1])  # an unknown method or option fails here


@dataclass
class TuneSpec:
    """How each variant (at each point) is tuned on the validation split, with one budget for all.

    Attributes:
        method: ``grid`` (every combination of ``space``) or ``optuna`` (``trials`` TPE trials over the recipe's
            own ``search`` section, or over ``space`` read as ``[low, high]`` ranges). Required: a ``tune`` section
            without it, or a grid with no values to try (no ``space``, no ``per_variant``), is refused rather than
            silently tuning nothing.
        space: dotted key -> values (grid) for every variant.
        per_variant: variant label -> its own space, replacing ``space`` for that variant.
        trials: optuna only.
        seeds: tuning seeds per setting; the choice is the best mean of ``metric`` over them.
        metric: validation metric (``null``: the recipe's monitor); direction from the metric's name.
    """

    method: Literal["grid", "optuna"] | None = None
    space: dict[str, list[Any]] = field(default_factory=dict)
    per_variant: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    trials: int = 20
    seeds: int = 1
    metric: str | None = None

    def __post_init__(self) -> None:
        if self.method is None:
            raise ConfigError(
                "method is missing: give 'grid' (with tune.space or tune.per_variant) or 'optuna' (tune.trials over "
                "tune.space or each recipe's search section); without tuning, write tune: null"
            )
        if self.method == "grid" and not self.space and not any(self.per_variant.values()):
            raise ConfigError(
                "method 'grid' with an empty tune.space and no tune.per_variant tunes nothing: give the values "
                "to try (tune.space: {model.l2: [0.01, 0.1]}) or write tune: null"
            )
        if self.seeds < 1 or self.trials < 1:
            raise ConfigError(f"tune.seeds={self.seeds} and tune.trials={self.trials} must be >= 1")
        if self.metric is not None and not self.metric.startswith("val_"):
            raise ConfigError(
                f"tune.metric={self.metric!r} must be a validation metric (val_...): tuning never "
                "looks at the test split"
            )

    def space_for(self, variant: str) -> dict[str, list[Any]]:
        return self.per_variant.get(variant, self.space)


@dataclass
class ClaimSpec:
    """A claim of the paper checked against the baseline on a test metric (two-sided Welch test, 5% level).

    Attributes:
        text: the claim in words, with its place in the paper.
        metric: the test metric that decides it.
        variant: the variant that should beat the baseline.
        baseline: the compared variant (``null``: the study's baseline).
        point: the grid point the claim is read at (``null``: every point must agree; a study without a grid has
            one point).
        direction: ``max`` or ``min`` (``null``: ``min`` for rmse/mae/mse/loss/logloss/ppl metrics, else ``max``).
    """

    text: str
    metric: str
    variant: str
    baseline: str | None = None
    point: dict[str, Any] | None = None
    direction: Literal["max", "min"] | None = None

    @property
    def better(self) -> str:
        if self.direction is not None:
            return self.direction
        lower = ("rmse", "mae", "mse", "loss", "logloss", "ppl", "seconds")
        return "min" if self.metric.endswith(lower) else "max"


@dataclass
class ExcludeSpec:
    """Points some variants never run: ``{variants: [MD alpha 0.3], point: {embeddings.budget: 2625}}``.

    Attributes:
        variants: the variants it applies to (``null``: every variant).
        point: the grid coordinates it matches (a subset: ``{}`` matches every point).
    """

    point: dict[str, Any] = field(default_factory=dict)
    variants: list[str] | None = None

    def matches(self, variant: str, point: dict[str, Any]) -> bool:
        if self.variants is not None and variant not in self.variants:
            return False
        return all(key in point and point[key] == value for key, value in self.point.items())


@dataclass
class AnalysisSpec:
    """A registered analysis (``embreg list``: analyses) and its arguments: ``{name: md-budget-curve, ...}``."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class StudySpec:
    """A study file (see the module docstring)."""

    name: str
    title: str
    paper: str
    variants: dict[str, VariantSpec]
    metrics: list[str]
    description: str = ""
    dataset: str = ""
    baseline: str | None = None
    common: list[str] = field(default_factory=list)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    exclude: list[ExcludeSpec] = field(default_factory=list)
    tune: TuneSpec | None = None
    seeds: int = 5
    seed_start: int = 0
    claims: list[ClaimSpec] = field(default_factory=list)
    analyses: list[AnalysisSpec] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    keep_runs: str | None = None
    """A folder (relative: to the current directory the study runs from) where each final run is trained as a run
    directory ``<keep_runs>/<variant slug>[/<point slug>]/seed-<s>`` and read back when it has finished there;
    ``null``: no run is kept. Tuning runs are never kept (:mod:`embreg.studies.kept`). Runs already in the run log
    are not run again, so a log written before ``keep_runs`` was set keeps nothing: give such a study a fresh log."""

    def __post_init__(self) -> None:
        if not self.variants:
            raise ConfigError(f"study {self.name!r} has no variants")
        if self.keep_runs is not None:
            from embreg.studies.kept import check_slugs

            if not str(self.keep_runs).strip():
                raise ConfigError(
                    "keep_runs is empty: give a folder (keep_runs: runs/<study>) or write keep_runs: null"
                )
            check_slugs(self.variants, self.points())
        if self.baseline is None:
            self.baseline = next(iter(self.variants))
        if self.baseline not in self.variants:
            raise ConfigError(f"baseline {self.baseline!r} is not a variant ({', '.join(self.variants)})")
        if self.seeds < 1:
            raise ConfigError(f"seeds={self.seeds} must be >= 1")
        for claim in self.claims:
            for label in (claim.variant, claim.baseline):
                if label is not None and label not in self.variants:
                    raise ConfigError(
                        f"claim {claim.text!r} names {label!r}, not a variant ({', '.join(self.variants)})"
                    )
        for rule in self.exclude:
            unknown_variants = set(rule.variants or ()) - set(self.variants)
            unknown_axes = set(rule.point) - set(self.grid)
            if unknown_variants or unknown_axes:
                raise ConfigError(
                    f"exclude names {sorted(unknown_variants)} (not variants) or {sorted(unknown_axes)} (not grid axes)"
                )
        if self.tune is not None:
            unknown = set(self.tune.per_variant) - set(self.variants)
            if unknown:
                raise ConfigError(f"tune.per_variant names {sorted(unknown)}, not variants")
        check_analyses(self.analyses)

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> StudySpec:
        return from_dict(cls, data)

    @property
    def final_seeds(self) -> list[int]:
        return list(range(self.seed_start, self.seed_start + self.seeds))

    def points(self) -> list[dict[str, Any]]:
        """Every combination of the reported ``grid`` axes (``[{}]`` without a grid)."""
        return grid_points(self.grid)

    def seeds_of(self, variant: str) -> list[int]:
        """The final seeds ``variant`` runs: :attr:`final_seeds`, or ``[seed_start]`` for a deterministic
        ``method`` variant."""
        return [self.seed_start] if self.variants[variant].method is not None else self.final_seeds

    def includes(self, variant: str, point: dict[str, Any]) -> bool:
        """Whether ``variant`` runs at ``point`` (no ``exclude`` rule matches)."""
        return not any(rule.matches(variant, point) for rule in self.exclude)

    def cells(self) -> list[tuple[str, dict[str, Any]]]:
        """Every (variant, point) pair that runs, variants in order within each point."""
        return [
            (variant, point) for point in self.points() for variant in self.variants if self.includes(variant, point)
        ]


def check_analyses(analyses: list[AnalysisSpec]) -> None:
    """Refuses an analysis that is not registered (slot ``analysis``) or whose arguments its config does not take.

    Raises:
        ConfigError: naming the entry (``analyses[i]``), the closest registered name or the unknown argument.

    Example:
        >>> check_analyses([AnalysisSpec("md-budget-curv")])
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: analyses[0]: unknown analysis 'md-budget-curv'; did you mean ...
    """
    if not analyses:
        return
    from embreg.registry import REGISTRY

    for index, analysis in enumerate(analyses):
        try:
            entry = REGISTRY.get("analysis", analysis.name)
        except ConfigError as error:
            raise ConfigError(f"analyses[{index}]: {error}") from None
        from_dict(entry.config, analysis.args, path=f"analyses[{index}].args")


def grid_points(space: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of ``space``'s values, in a stable order.

    Example:
        >>> grid_points({"a": [1, 2], "b": ["x"]})
        [{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'x'}]
    """
    if not space:
        return [{}]
    keys = list(space)
    return [dict(zip(keys, values)) for values in itertools.product(*(space[k] for k in keys))]


def point_overrides(point: dict[str, Any]) -> list[str]:
    """``--set`` strings of a point (``{"train.lr": 0.01}`` -> ``["train.lr=0.01"]``)."""
    import yaml

    return [
        f"{key}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}"
        for key, value in point.items()
    ]


def load_study(path: str | Path) -> StudySpec:
    """Reads and checks a study file; its ``name`` must match the file name."""
    path = Path(path)
    spec = StudySpec.from_mapping(load_yaml(path))
    if spec.name != path.stem:
        raise ConfigError(f"study file {path} names itself {spec.name!r}; name it {path.stem!r} or rename the file")
    return spec

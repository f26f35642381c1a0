"""The SSE, fine-tuning and dropout study files load, every recipe and override in them is valid, and each run log
holds the study's variants and seeds."""

from pathlib import Path

import pytest

from embreg.recipes import load_recipe
from embreg.recipes.baselines import split_options
from embreg.registry import REGISTRY, load_builtins
from embreg.studies import RunLog, load_study
from embreg.studies.spec import point_overrides

ROOT = Path(__file__).resolve().parents[2]
STUDIES = [
    "sse-mf",
    "sse-mf-no-l2",
    "sse-bpr",
    "finetuning-stability-binary",
    "finetuning-stability-polarity",
    "finetuning-stability-mixout-best",
    "finetuning-size-curve",
    "dropout-lm",
    "dropout-lm-fig1",
]
# points whose per-seed results were never stored (only mean ± std): the runner fills them
NOT_LOGGED = {"finetuning-size-curve": [{"data.train_size": 500}, {"data.train_size": 2000}]}


@pytest.mark.parametrize("name", STUDIES)
def test_study_loads_and_overrides_are_valid(name):
    spec = load_study(ROOT / "studies" / f"{name}.yaml")
    for variant in spec.variants.values():
        for point in spec.points():
            overrides, _ = split_options([*spec.common, *variant.set, *point_overrides(point), "train.seed=0"])
            recipe = load_recipe(variant.recipe, overrides)
            assert recipe.train.seed == 0
    load_builtins()
    for analysis in spec.analyses:
        entry = REGISTRY.get("analysis", analysis.name)
        from embreg.config import from_dict

        from_dict(entry.config, analysis.args)


@pytest.mark.parametrize("name", STUDIES)
def test_log_matches_study(name):
    spec = load_study(ROOT / "studies" / f"{name}.yaml")
    records = RunLog(ROOT / "studies" / "logs" / f"{name}.jsonl").read()
    assert records and all(r.study == name and r.phase == "final" for r in records)
    assert {r.variant for r in records} == set(spec.variants)
    for variant, vspec in spec.variants.items():
        for point in spec.points():
            if point in NOT_LOGGED.get(name, []):
                continue
            runs = [r for r in records if r.variant == variant and r.point == point]
            assert set(spec.seeds_of(variant)) <= {r.seed for r in runs}, (variant, point)
            for r in runs:
                assert r.recipe == vspec.recipe
                assert r.overrides == [*spec.common, *vspec.set, *point_overrides(point), f"train.seed={r.seed}"]
                if vspec.method is None and name != "finetuning-size-curve":  # a method row reports its own metrics
                    assert all(m in r.metrics for m in spec.metrics)
                assert r.machine and r.finished
    keys = [r.key for r in records]
    assert len(keys) == len(set(keys))

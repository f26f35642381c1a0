"""The masked-LM studies load, every run of them is a valid recipe, and the encoders the fine-tuning studies start
from are the runs the pre-training study keeps."""

from pathlib import Path

import pytest

from embreg.recipes import load_recipe
from embreg.studies import load_study
from embreg.studies.spec import point_overrides

ROOT = Path(__file__).resolve().parents[2]
FINETUNING = ["mlm-sse-reviews", "mlm-sse-polarity"]


def _recipes(name: str) -> dict[str, list]:
    spec = load_study(ROOT / "studies" / f"{name}.yaml")
    return {
        variant: [
            load_recipe(vspec.recipe, [*spec.common, *vspec.set, *point_overrides(point), "train.seed=0"])
            for point in spec.points()
        ]
        for variant, vspec in spec.variants.items()
    }


def test_the_pretraining_study_keeps_mlm_and_mlm_sse_encoders_with_checkpoints() -> None:
    spec = load_study(ROOT / "studies" / "mlm-sse-pretraining.yaml")
    assert spec.keep_runs == "runs/mlm-sse-study" and spec.seeds >= 2
    recipes = _recipes("mlm-sse-pretraining")
    assert set(recipes) == {"MLM", "MLM+SSE"}
    for variant, (recipe,) in recipes.items():
        assert recipe.task == "mlm" and recipe.train.keep_checkpoints == "best"
        transforms = {kind: spec_.entry.name for kind, spec_ in recipe.index_transforms.items()}
        assert transforms == ({} if variant == "MLM" else {"token": "sse-se", "label": "label-sse"})


@pytest.mark.parametrize("name", FINETUNING)
def test_every_fine_tuning_run_starts_from_a_kept_pretraining_run(name: str) -> None:
    pretraining = load_study(ROOT / "studies" / "mlm-sse-pretraining.yaml")
    kept = {f"{pretraining.keep_runs}/{slug}/seed-{s}" for slug in ("mlm", "mlm-sse") for s in pretraining.final_seeds}
    spec = load_study(ROOT / "studies" / f"{name}.yaml")
    assert spec.seeds >= 5
    sources, fine_tuning_sse = {}, {}
    for variant, recipes in _recipes(name).items():
        assert all(recipe.task == "classification" for recipe in recipes)
        sources[variant] = {recipe.model.config.pretrained for recipe in recipes}
        fine_tuning_sse[variant] = {
            (spec_.entry.name, spec_.p) for recipe in recipes for spec_ in recipe.index_transforms.values()
        }
    assert sources.pop("No CPT") == {"all-minilm-l6-v2"}
    # <keep_runs>/<variant slug>/seed-<s> of mlm-sse-pretraining: every kept encoder, with and without SSE in fine-tuning
    assert {next(iter(s)) for v, s in sources.items() if "FT+SSE" not in v} == kept
    assert {next(iter(s)) for v, s in sources.items() if "FT+SSE" in v} == {k for k in kept if "mlm-sse/" in k}
    assert all(fine_tuning_sse[v] == ({("sse-se", 0.01)} if "FT+SSE" in v else set()) for v in fine_tuning_sse)
    assert "mlm-sse-pretraining" in " ".join(spec.notes)

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
    spec = load_study(ROOT / "studies" / f"{name}.yaml")
    assert spec.seeds >= 5 and set(spec.variants) == {"No CPT", "MLM", "MLM+SSE"}
    sources = {}
    for variant, recipes in _recipes(name).items():
        assert all(recipe.task == "classification" for recipe in recipes)
        sources[variant] = {recipe.model.config.pretrained for recipe in recipes}
    assert sources == {
        "No CPT": {"all-minilm-l6-v2"},
        "MLM": {"runs/mlm-sse-study/mlm/seed-0"},  # <keep_runs>/<variant slug>/seed-<s> of mlm-sse-pretraining
        "MLM+SSE": {"runs/mlm-sse-study/mlm-sse/seed-0"},
    }
    assert "mlm-sse-pretraining" in " ".join(spec.notes)

"""The masked-LM studies load, every run of them is a valid recipe, and the pre-trained encoders they fine-tune from
are the mlm runs their notes ask for."""

from pathlib import Path

import pytest

from embreg.recipes import load_recipe
from embreg.studies import load_study
from embreg.studies.spec import point_overrides

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ["mlm-sse-reviews", "mlm-sse-polarity"]


@pytest.mark.parametrize("name", STUDIES)
def test_every_run_of_the_study_is_a_valid_recipe(name: str) -> None:
    spec = load_study(ROOT / "studies" / f"{name}.yaml")
    assert spec.seeds >= 5 and {"No CPT", "MLM", "MLM+SSE"} <= set(spec.variants)
    sources = set()
    for variant, vspec in spec.variants.items():
        for point in spec.points():
            recipe = load_recipe(vspec.recipe, [*spec.common, *vspec.set, *point_overrides(point), "train.seed=0"])
            assert recipe.task == "classification"
            sources.add((variant, recipe.model.config.pretrained))
    pretraining = {source for _, source in sources if source != "all-minilm-l6-v2"}
    assert {Path(s).parent.name for s in pretraining} == {"mlm", "mlm-sse"}
    assert {Path(s).name for s in pretraining} == {"seed-0", "seed-1"}  # two pre-training seeds each
    notes = " ".join(spec.notes)
    if name == "mlm-sse-reviews":
        assert "embreg run mlm --seeds 2 --out runs/mlm-sse-study/mlm" in notes
        assert "embreg run mlm-sse --seeds 2 --out runs/mlm-sse-study/mlm-sse" in notes
        assert [point["data.task"] for point in spec.points()] == ["binary", "rating"]

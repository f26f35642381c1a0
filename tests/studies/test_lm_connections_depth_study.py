"""The depth study of layer connections on the LSTM LM: the file is valid and each of its deep variants trains."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from embreg.recipes import load_recipe
from embreg.studies import load_study
from embreg.studies.runner import _check, execute, run_overrides

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "studies" / "lm-connections-depth.yaml"


def test_the_study_compares_highway_and_residual_with_plain_stacks_at_depths_2_and_4() -> None:
    spec = load_study(STUDY)
    _check(spec, [])  # every variant loads and the metrics are the LM task's
    settings = set()
    for variant in spec.variants.values():
        recipe = load_recipe(variant.recipe, [*spec.common, *variant.set])
        settings.add((recipe.model.config.connections, recipe.model.config.layers))
    assert settings == {(c, d) for c in ("none", "residual", "highway") for d in (2, 4)}
    assert spec.seeds >= 5 and {claim.baseline for claim in spec.claims} == {"plain, 2 layers", "plain, 4 layers"}


@pytest.mark.integration
def test_a_tiny_run_of_each_deep_variant_trains() -> None:
    """The dry check: one epoch on a few thousand tokens per 4-layer variant, finite perplexities."""
    spec = load_study(STUDY)
    tiny = [
        *load_recipe("lm-dropout").adapter.smoke_overrides,
        "train.epochs=1",
        "train.min_epochs=1",
        "model.hidden_dim=16",
        "model.emb_dim=16",
    ]
    for name in ("plain, 4 layers", "residual, 4 layers", "highway, 4 layers"):
        metrics, _, _ = execute(spec.variants[name].recipe, run_overrides(spec, name, {}, {}, 0, tiny))
        assert math.isfinite(metrics["val_ppl"]) and metrics["val_ppl"] > 1, name

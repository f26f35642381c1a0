"""torch's own dropout modules count as dropout: Dropout_k draws k masks on them, the clean pass pauses them, and a
model holding one is not called dropout-free by the no-op warning."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from embreg.models.output import ModelOutput
from embreg.nn.dropout_control import dropout_active, dropout_disabled, has_dropout
from embreg.recipes.no_ops import NoOpWarning, no_op_reason
from embreg.regularizers.dropout.objective import DropoutK


class CountingModel(nn.Module):
    """A linear model with an ``nn.Dropout`` on its input that counts its forward passes."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.drop = nn.Dropout(p)
        self.linear = nn.Linear(4, 1)
        self.calls = 0

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        self.calls += 1
        return ModelOutput(self.linear(self.drop(batch["x"])).squeeze(-1))

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        return ((output.predictions - batch["y"]) ** 2).mean()


@pytest.mark.parametrize("p, passes", [(0.5, 4), (0.0, 1)])
def test_dropout_k_draws_k_masks_on_a_torch_dropout_module(p, passes):
    model = CountingModel(p)
    batch = {"x": torch.ones(8, 4), "y": torch.zeros(8)}
    DropoutK(4)(model, batch)
    assert model.calls == passes
    model.eval()
    DropoutK(4)(model, batch)
    assert model.calls == passes + 1  # eval: one pass


@pytest.mark.parametrize("module", [nn.Dropout(0.3), nn.Dropout1d(0.3), nn.AlphaDropout(0.3)])
def test_dropout_disabled_pauses_torch_dropout_modules_and_restores_them(module):
    model = nn.Sequential(nn.Identity(), module)
    x = torch.ones(2, 3, 5)
    assert dropout_active(model)
    with dropout_disabled(model):
        assert not dropout_active(model)
        assert torch.equal(model(x), x)
    assert module.p == 0.3 and dropout_active(model)


def test_a_model_with_torch_dropout_is_not_reported_as_a_dropout_k_no_op():
    assert has_dropout(CountingModel(0.5)) and not has_dropout(CountingModel(0.0))
    assert no_op_reason(DropoutK(4), CountingModel(0.5)) is None
    assert "no active dropout" in no_op_reason(DropoutK(4), CountingModel(0.0))


def test_dropout_k_on_mf_with_vector_dropout_builds_without_a_no_op_warning():
    from embreg.recipes import load_recipe
    from embreg.recipes.run import build_run

    recipe = load_recipe(
        "mf", ["data.max_rows=2000", "model.dropout=0.3", "objective={name: dropout-k, k: 3}", "train.progress=false"]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoOpWarning)
        built = build_run(recipe)
    assert dropout_active(built.model.train())

"""PredictionEnsemble: each task's averaging rule, and an ensemble of identical models equals one model."""

from __future__ import annotations

import pytest
import torch

from embreg.errors import ConfigError
from embreg.models import BiasedMF
from embreg.models.ensemble import PredictionEnsemble, combine_for_task, combine_outputs
from embreg.models.output import ModelOutput


class Fixed(torch.nn.Module):
    def __init__(self, predictions: torch.Tensor) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(predictions.clone())

    def forward(self, batch):
        return ModelOutput(self.weight)

    def score_all(self, users):
        return self.weight[users]


def test_classification_averages_probabilities() -> None:
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    combined = combine_outputs([a, b], "probabilities")
    assert torch.allclose(combined.softmax(-1), (a.softmax(-1) + b.softmax(-1)) / 2, atol=1e-6)


def test_clicks_average_probabilities_and_return_a_logit() -> None:
    a, b = torch.randn(5), torch.randn(5)
    combined = combine_outputs([a, b], "click")
    assert torch.allclose(torch.sigmoid(combined), (torch.sigmoid(a) + torch.sigmoid(b)) / 2, atol=1e-6)


def test_ratings_and_scores_are_averaged_as_they_are() -> None:
    a, b = torch.randn(3, 7), torch.randn(3, 7)
    ensemble = PredictionEnsemble([Fixed(a), Fixed(b)], "mean")
    assert torch.allclose(ensemble.score_all(torch.tensor([0, 2])), (a[[0, 2]] + b[[0, 2]]) / 2)


@pytest.mark.parametrize("combine", ["probabilities", "click", "mean"])
def test_an_ensemble_of_identical_models_predicts_what_one_model_does(combine: str) -> None:
    logits = torch.randn(6, 4) if combine == "probabilities" else torch.randn(6)
    one = Fixed(logits)
    ensemble = PredictionEnsemble([one, Fixed(logits), Fixed(logits)], combine)  # type: ignore[arg-type]
    single = one({}).predictions
    together = ensemble({}).predictions
    if combine == "probabilities":
        assert torch.allclose(together.softmax(-1), single.softmax(-1), atol=1e-6)
        assert torch.equal(together.argmax(-1), single.argmax(-1))
    elif combine == "click":
        assert torch.allclose(torch.sigmoid(together), torch.sigmoid(single), atol=1e-6)
    else:
        assert torch.allclose(together, single)


def test_a_real_model_ensemble_of_copies_rates_as_the_model() -> None:
    torch.manual_seed(0)
    model = BiasedMF.build(5, 6, 4, global_mean=3.5)
    batch = {"user": torch.tensor([0, 1, 4]), "item": torch.tensor([5, 2, 0])}
    ensemble = PredictionEnsemble([model, model], combine_for_task("rating"))
    assert torch.allclose(ensemble(batch).predictions, model(batch).predictions)


def test_a_task_without_an_averaging_rule_is_refused() -> None:
    with pytest.raises(ConfigError, match="task 'translation' has no ensemble rule"):
        combine_for_task("translation")
    with pytest.raises(ValueError, match="at least one model"):
        PredictionEnsemble([])

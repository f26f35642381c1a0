"""CTR metrics against obvious references: AUC by counting pairs, log-loss and accuracy by hand."""

import math

import pytest
import torch

from embreg.errors import EmbregError
from embreg.models import ModelOutput
from embreg.tasks.ctr.evaluation import CTREvaluator, binary_accuracy, binary_log_loss, roc_auc


def _pairwise_auc(scores, labels):
    pos = [s for s, y in zip(scores.tolist(), labels.tolist()) if y == 1]
    neg = [s for s, y in zip(scores.tolist(), labels.tolist()) if y == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def test_auc_equals_pair_counting_with_ties():
    g = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 6, (300,), generator=g).float()  # many ties
    labels = (torch.rand(300, generator=g) < 0.4).float()
    assert roc_auc(scores, labels) == pytest.approx(_pairwise_auc(scores, labels), abs=1e-12)
    assert math.isnan(roc_auc(scores, torch.ones(300)))


def test_log_loss_and_accuracy_by_hand():
    logits, labels = torch.tensor([2.0, -1.0, 0.0]), torch.tensor([1.0, 1.0, 0.0])
    p = torch.sigmoid(logits.double())
    expected = -(torch.log(p[0]) + torch.log(p[1]) + torch.log(1 - p[2])) / 3
    assert binary_log_loss(logits, labels) == pytest.approx(expected.item())
    assert binary_accuracy(logits, labels) == pytest.approx(2 / 3)
    with pytest.raises(EmbregError, match="1-d of equal length"):
        binary_log_loss(logits, labels[:2])


def test_evaluator_batches_and_restores_training_mode():
    class Echo(torch.nn.Module):
        def forward(self, batch):
            return ModelOutput(predictions=batch["x"] * (0.0 if self.training else 1.0))

    data = {"x": torch.linspace(-2, 2, 10), "label": (torch.arange(10) >= 5).float()}
    model = Echo().train()
    metrics = CTREvaluator({"test": data}, batch_size=3)(model, "test")
    assert model.training and metrics["auc"] == 1.0 and metrics["accuracy"] == 1.0
    with pytest.raises(EmbregError, match="no 'label'"):
        CTREvaluator({"test": {"x": data["x"]}})

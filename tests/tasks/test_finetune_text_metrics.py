"""Text-task metrics against scipy/hand values, the evaluator's ordering, and the warm-up schedule."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from embreg.errors import ConfigError, EmbregError
from embreg.models import ModelOutput
from embreg.optim.warmup import WarmupLinearAdamW, warmup_linear_factor
from embreg.tasks.text.evaluation import TextEvaluator, classification_metrics, regression_metrics


def _binary_mcc(pred: np.ndarray, true: np.ndarray) -> float:
    tp, tn = np.sum((pred == 1) & (true == 1)), np.sum((pred == 0) & (true == 0))
    fp, fn = np.sum((pred == 1) & (true == 0)), np.sum((pred == 0) & (true == 1))
    return float(tp * tn - fp * fn) / np.sqrt(float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))


def test_classification_metrics_match_their_definitions() -> None:
    rng = np.random.default_rng(0)
    true, pred = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    m = classification_metrics(pred, true, 2)
    tp = np.sum((pred == 1) & (true == 1))
    assert m["accuracy"] == pytest.approx(np.mean(pred == true))
    assert m["f1"] == pytest.approx(2 * tp / (np.sum(pred == 1) + np.sum(true == 1)))
    assert m["mcc"] == pytest.approx(_binary_mcc(pred, true))
    multi = classification_metrics(np.array([0, 1, 2, 2]), np.array([0, 1, 2, 1]), 3)
    assert multi["accuracy"] == 0.75 and "macro_f1" in multi and 0 < multi["mcc"] < 1
    assert classification_metrics(np.zeros(4, int), np.array([0, 1, 0, 1]), 2)["mcc"] == 0.0


def test_regression_metrics_match_scipy() -> None:
    rng = np.random.default_rng(1)
    y = rng.normal(size=50)
    p = y + rng.normal(scale=0.5, size=50)
    m = regression_metrics(p, y)
    assert m["pearson"] == pytest.approx(stats.pearsonr(p, y).statistic)
    assert m["spearman"] == pytest.approx(stats.spearmanr(p, y).statistic)
    assert m["corr"] == pytest.approx((m["pearson"] + m["spearman"]) / 2)
    assert regression_metrics(np.ones(3), np.array([1.0, 2.0, 3.0]))["pearson"] == 0.0
    with pytest.raises(EmbregError, match="equally long"):
        regression_metrics(np.ones(3), np.ones(2))


def test_evaluator_returns_predictions_in_the_original_order() -> None:
    class Echo(torch.nn.Module):
        def forward(self, batch):
            return ModelOutput(batch["input_ids"][:, 0].float())

    lengths = torch.tensor([3, 1, 2, 3, 1])
    mask = (torch.arange(3).unsqueeze(0) < lengths.unsqueeze(1)).long()
    ids = torch.arange(5).unsqueeze(1).expand(5, 3) * mask
    data = {"valid": {"input_ids": ids, "attention_mask": mask, "labels": torch.arange(5).float()}}
    evaluator = TextEvaluator(data, num_labels=1, batch_size=2)
    assert evaluator.predict(Echo(), "valid").tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert evaluator(Echo(), "valid")["pearson"] == pytest.approx(1.0)


def test_warmup_then_linear_decay_and_state_resumes() -> None:
    assert [warmup_linear_factor(s, 10, 0) for s in (0, 5)] == [1.0, 0.5]
    param = torch.nn.Parameter(torch.zeros(1))
    opt = WarmupLinearAdamW([param], lr=1.0, total_steps=10, warmup=0.2)
    lrs = []
    for _ in range(10):
        param.grad = torch.ones(1)
        opt.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs[:3] == [0.5, 1.0, 1.0] and lrs[-1] == pytest.approx(0.125)
    again = WarmupLinearAdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0, total_steps=10, warmup=0.2)
    again.load_state_dict(opt.state_dict())
    assert again.param_groups[0]["schedule_step"] == 10
    with pytest.raises(ConfigError, match=r"warmup=1.0 is outside \[0, 1\)"):
        WarmupLinearAdamW([param], lr=1.0, total_steps=10, warmup=1.0)

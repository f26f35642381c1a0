"""Divergence is a failure: non-finite weights after the last step, and an error that names a last good checkpoint
only where one exists."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from embreg.batching.batches import TensorBatches
from embreg.errors import TrainingError
from embreg.regularizers.base import standard_objective
from embreg.runs.checkpoint import load_checkpoint
from embreg.train.finite import check_final_metrics, non_finite_parameters
from embreg.train.trainer import LAST_CHECKPOINT
from tests.helpers.trainers import poison_last_step, tiny_mf_trainer


def _trainer(data, run_dir: Path | None, objective=standard_objective, epochs: int = 3):
    return tiny_mf_trainer(data, run_dir, epochs=epochs, objective=objective)


def _nan_from_call(first_bad: int):
    """The standard objective whose loss is NaN from its ``first_bad``-th call (0-based) on."""
    calls = [0]

    def objective(model, batch):
        loss, output = standard_objective(model, batch)
        calls[0] += 1
        return (loss * math.nan if calls[0] > first_bad else loss), output

    return objective


def test_divergence_in_the_first_epoch_names_no_checkpoint(tmp_path, synthetic_ratings):
    run_dir = tmp_path / "run"
    with pytest.raises(TrainingError, match=r"loss became nan \(.*\) at epoch 0, step 1\. Try a lower") as info:
        _trainer(synthetic_ratings, run_dir, _nan_from_call(1)).fit()
    assert "checkpoint" not in str(info.value) and not (run_dir / LAST_CHECKPOINT).exists()


def test_divergence_after_an_epoch_names_the_last_checkpoint(tmp_path, synthetic_ratings):
    run_dir = tmp_path / "run"
    steps = len(TensorBatches(synthetic_ratings, 64, seed=0))
    with pytest.raises(TrainingError, match=r"epoch 1, step \d+; the last good checkpoint is .*last\.safetensors"):
        _trainer(synthetic_ratings, run_dir, _nan_from_call(steps + 1)).fit()
    assert (run_dir / LAST_CHECKPOINT).exists()


def test_divergence_without_a_run_directory_names_no_checkpoint(synthetic_ratings):
    with pytest.raises(TrainingError) as info:
        _trainer(synthetic_ratings, None, _nan_from_call(0)).fit()
    assert "checkpoint" not in str(info.value)


def test_nan_weights_after_the_last_step_are_a_training_error(tmp_path, synthetic_ratings, monkeypatch):
    poison_last_step(monkeypatch)
    run_dir = tmp_path / "run"
    with pytest.raises(TrainingError, match=r"weights became non-finite in epoch 1 .*last good checkpoint is"):
        _trainer(synthetic_ratings, run_dir, epochs=2).fit()
    assert not (run_dir / "metrics.json").exists()
    model = load_checkpoint(run_dir / LAST_CHECKPOINT)["model"]  # the epoch before: finite
    assert all(torch.isfinite(t).all() for t in model.values() if t.is_floating_point())


def test_non_finite_parameters_names_them():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    assert non_finite_parameters(model) == []
    with torch.no_grad():
        model[1].weight[0, 0] = math.inf
    assert non_finite_parameters(model) == ["1.weight"]


def test_final_metrics_check():
    model = torch.nn.Linear(1, 1)
    check_final_metrics({"val_auc": 0.7, "test_auc": 0.6, "test_mse_rare": math.nan}, "val_auc", model)  # passes
    with pytest.raises(TrainingError, match=r"final val_auc is nan; the model's weights are finite, so either") as e:
        check_final_metrics({"val_auc": math.nan, "test_auc": 0.6}, "val_auc", model, lr=1e30)
    message = str(e.value)  # both causes: a learning rate too high (named) and a split that cannot define it
    assert "a learning rate too high (train.lr=1e+30)" in message and "the split cannot define this metric" in message
    with torch.no_grad():
        model.weight.fill_(math.nan)
    with pytest.raises(TrainingError, match=r"final test_rmse is inf; the model's weights are not finite \(weight\)"):
        check_final_metrics({"val_rmse": 1.0, "test_rmse": math.inf}, "val_rmse", model)


@pytest.mark.parametrize("name", ["embreg.train.finite", "embreg.runs.state_checks", "embreg.runs.checkpoint"])
def test_docstring_examples_run(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result

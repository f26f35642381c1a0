"""A trainer resumes only from a checkpoint that fits it: same model shapes, no more epochs trained than it has."""

from __future__ import annotations

import pytest
import torch

from embreg.errors import ConfigError, DataError
from embreg.train.resume import check_resumable
from tests.helpers.trainers import tiny_mf_trainer


def _trainer(data, run_dir, *, dim=4, epochs=2):
    return tiny_mf_trainer(data, run_dir, epochs=epochs, dim=dim, batch_size=128)


def test_a_checkpoint_of_another_model_shape_is_refused_before_loading(tmp_path, synthetic_ratings):
    _trainer(synthetic_ratings, tmp_path).fit()
    (tmp_path / "metrics.json").unlink()
    other = _trainer(synthetic_ratings, tmp_path, dim=8, epochs=3)
    weights = other.model.state_dict()["user_embedding.weight"].clone()
    with pytest.raises(DataError, match=r"does not fit the model: its model key '[\w.]+' has shape \[30, 4\]"):
        other.fit(resume=True)
    assert torch.equal(other.model.state_dict()["user_embedding.weight"], weights)  # nothing was loaded
    assert not (tmp_path / "metrics.json").exists()


def test_a_checkpoint_that_trained_more_epochs_is_refused(tmp_path, synthetic_ratings):
    _trainer(synthetic_ratings, tmp_path, epochs=3).fit()
    with pytest.raises(ConfigError, match=r"has trained 3 epochs, more than epochs=2"):
        _trainer(synthetic_ratings, tmp_path, epochs=2).fit(resume=True)


def test_a_checkpoint_within_the_budget_passes():
    check_resumable({"next_epoch": 3}, 3, "last.safetensors")
    with pytest.raises(ConfigError, match=r"has trained 4 epochs, more than epochs=3"):
        check_resumable({"next_epoch": 4}, 3, "x")

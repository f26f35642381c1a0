"""``train.index_transforms_on``: index transforms drawn on the batch before the step (embreg.train.host_draws).

Every family's transforms drawn this way give the very same run as drawn in the forward pass: that is checked for
every index transform on every model in tests/test_registry_matrix.py. The GPU side (pinned draws, the transforms
kept on the CPU, no host sync in the forward pass) is in tests/gpu/test_gpu_host_draws.py.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.models import BPR, BiasedMF
from embreg.recipes import load_recipe
from embreg.sse import SSE
from embreg.train.host_draws import plan_host_draws
from tests.train.test_trainer import Interrupt, _make

CPU, CUDA = torch.device("cpu"), torch.device("cuda")  # plan_host_draws only reads the device's type


def _mf(**transforms: nn.Module) -> BiasedMF:
    return BiasedMF.build(5, 7, 2, **transforms)


class Shift(nn.Module):
    """An ids -> ids module that is not an embreg IndexTransform."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return (ids + 1) % 7


def test_auto_draws_on_the_host_when_training_on_cuda_only() -> None:
    model = _mf(item_transform=SSE(7, p=0.5, seed=0))
    assert plan_host_draws(model, CPU, "auto") is None
    draws = plan_host_draws(model, CUDA, "auto")
    assert draws is not None and draws.transforms == [model.item_transform]
    assert plan_host_draws(model, CUDA, "device") is None
    assert plan_host_draws(model, CPU, "host") is not None


def test_a_model_without_transforms_has_nothing_to_draw() -> None:
    assert plan_host_draws(_mf(), CUDA, "auto") is None
    assert plan_host_draws(_mf(), CPU, "host") is None


def test_bpr_draws_positives_then_negatives_from_its_one_item_transform() -> None:
    model = BPR.build(3, 50, 2, item_transform=SSE(50, p=0.5, seed=4))
    draws = plan_host_draws(model, CPU, "host")
    assert draws is not None and draws.transforms == [model.item_transform]
    batch = {"user": torch.tensor([0, 1, 2] * 20), "pos": torch.arange(60) % 50, "neg": (torch.arange(60) + 7) % 50}
    drawn = draws.draw(batch)
    twin = SSE(50, p=0.5, seed=4)
    assert torch.equal(drawn["pos"], twin(batch["pos"])) and torch.equal(drawn["neg"], twin(batch["neg"]))
    assert drawn["user"] is batch["user"] and torch.equal(batch["pos"], torch.arange(60) % 50)  # the source is kept


def test_an_unknown_mode_is_refused_by_the_trainer_and_by_the_recipe() -> None:
    with pytest.raises(ConfigError, match="index_transforms_on='gpu' is not a choice"):
        plan_host_draws(_mf(), CPU, "gpu")
    with pytest.raises(ConfigError, match="index_transforms_on"):
        load_recipe("mf-sse-se", ["train.index_transforms_on=gpu"])


def test_host_draws_refuse_what_they_cannot_draw_and_auto_falls_back_to_the_forward_pass() -> None:
    foreign = _mf(user_transform=Shift(), item_transform=SSE(7, p=0.5, seed=0))
    with pytest.raises(ConfigError, match="Shift are not embreg IndexTransforms"):
        plan_host_draws(foreign, CPU, "host")
    assert plan_host_draws(foreign, CUDA, "auto") is None
    with pytest.raises(ConfigError, match="train.fused_step"):
        plan_host_draws(_mf(item_transform=SSE(7, p=0.5, seed=0)), CPU, "host", fused_step=True)

    class Bare(nn.Module):
        def forward(self, batch):
            return batch

    with pytest.raises(ConfigError, match="Bare does not say where its index transforms act"):
        plan_host_draws(Bare(), CPU, "host")


def test_the_transforms_pass_ids_through_inside_the_block_only() -> None:
    model = _mf(item_transform=SSE(7, p=1.0, seed=0))
    draws = plan_host_draws(model, CPU, "host")
    assert draws is not None
    ids = torch.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="inside"):
        with draws.passed_through():
            assert model.item_transform(ids) is ids
            raise RuntimeError("inside")
    assert not model.item_transform.passthrough
    assert not torch.equal(model.item_transform(ids), ids)  # p = 1: every id swapped again


def test_a_run_with_host_draws_resumes_as_if_uninterrupted(tmp_path, synthetic_ratings) -> None:
    full = _make(synthetic_ratings, tmp_path / "full", index_transforms_on="host").fit()
    in_forward = _make(synthetic_ratings, tmp_path / "forward", index_transforms_on="device").fit()
    assert full.metrics == in_forward.metrics  # the same swaps, wherever they are drawn

    def stop_after_third(trainer, record):
        if record["epoch"] == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        _make(synthetic_ratings, tmp_path / "cut", callbacks=[stop_after_third], index_transforms_on="host").fit()
    resumed = _make(synthetic_ratings, tmp_path / "cut", index_transforms_on="host").fit(resume=True)
    assert resumed.metrics == full.metrics

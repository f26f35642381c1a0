"""Every model family on CUDA (fp32, bf16; fp16 with its grad scaler) and checkpoints between GPU and CPU.

Each family trains one step from its plainest shipped recipe, shrunk by its task's ``smoke_overrides`` (as in
tests/test_registry_matrix.py), on a small slice of the real data; a family whose data is not cached on this
machine is skipped (a GPU machine may have no network). The encoder family trains a tiny random BERT instead of
the pretrained MiniLM. These tests are marked ``gpu``: without CUDA they are skipped (tests/gpu/conftest.py).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from embreg.batching.batches import TensorBatches
from embreg.errors import DataError
from embreg.models import BiasedMF
from embreg.optim.optimizers import optimizer_factory
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from embreg.registry import REGISTRY
from embreg.runs.checkpoint import load_checkpoint
from embreg.runs.run_dir import LAST_CHECKPOINT
from embreg.sse import SSE
from embreg.tasks.ratings.evaluation import RatingEvaluator
from embreg.train.seeding import seed_everything
from embreg.train.trainer import Trainer
from tests.helpers.recipes import base_recipe

pytestmark = pytest.mark.gpu

DEVICE = "cuda"


FAMILIES = REGISTRY.names("model")


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from tests.helpers.finetune_tiny import tiny_checkpoint

    return Path(tiny_checkpoint(tmp_path_factory.mktemp("tiny-bert"), mask=True))  # [MASK]: the mlm family


def _built(model: str, overrides: list[str], request: pytest.FixtureRequest) -> Any:
    name = base_recipe(model)
    assert name is not None, f"model {model!r} has no shipped recipe"
    extra = list(load_recipe(name).adapter.smoke_overrides) + overrides
    if "pretrained" in REGISTRY.get("model", model).provides:
        extra.append(f"model.pretrained={request.getfixturevalue('tiny_encoder')}")
    recipe = load_recipe(name, extra)
    threads = torch.get_num_threads()
    try:
        try:
            prepared = recipe.adapter.prepare(recipe)
        except DataError as exc:
            pytest.skip(f"{name}: its data is not available here ({exc})")
        return build_run(recipe, prepared)
    finally:
        torch.set_num_threads(threads)


def _dense(grad: torch.Tensor) -> torch.Tensor:
    return grad.coalesce().values() if grad.is_sparse else grad


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("model", FAMILIES)
def test_family_trains_a_step_and_evaluates_on_cuda(model: str, precision: str, request) -> None:
    built = _built(model, [f"train.device={DEVICE}", f"train.precision={precision}"], request)
    trainer = built.trainer(None)
    assert trainer.device.type == DEVICE
    assert all(p.device.type == DEVICE for p in trainer.model.parameters())
    trainer.model.train()
    loss, penalty = trainer._train_step(next(iter(built.batches.epoch(0))), 0)
    assert math.isfinite(loss) and math.isfinite(penalty)
    grads = {n: p.grad for n, p in trainer.model.named_parameters() if p.grad is not None}
    assert grads, "no parameter got a gradient"
    assert all(g.device.type == DEVICE for g in grads.values())
    assert [n for n, g in grads.items() if not torch.isfinite(_dense(g)).all()] == []
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters() if p.is_floating_point())
    metrics = trainer._evaluate("valid")
    assert metrics and all(isinstance(v, float) for v in metrics.values())


@pytest.mark.parametrize("model", ["ncf", "dlrm"])
def test_fp16_trains_with_a_grad_scaler_on_cuda(model: str, request) -> None:
    built = _built(model, [f"train.device={DEVICE}", "train.precision=fp16"], request)
    trainer = built.trainer(None)
    assert trainer._scaler is not None
    trainer.model.train()
    batches = iter(built.batches.epoch(0))
    losses = [trainer._train_step(next(batches), 0)[0] for _ in range(3)]
    assert all(math.isfinite(loss) for loss in losses), losses
    assert trainer._scaler.get_scale() > 0


# ------------------------------------------------------------------------------------------------ checkpoints
def _mf_trainer(data: dict[str, torch.Tensor], run_dir: Path, epochs: int, device: str, **kw) -> Trainer:
    seed_everything(0)
    model = BiasedMF.build(
        30,
        40,
        4,
        global_mean=3.0,
        dropout=0.2,
        user_transform=SSE(30, 0.1, seed=1),
        item_transform=SSE(40, 0.1, seed=2),
    )
    n = data["user"].shape[0]
    train = {k: v[: n * 8 // 10] for k, v in data.items()}
    valid = {k: v[n * 8 // 10 :] for k, v in data.items()}
    return Trainer(
        model,
        optimizer_factory("adam", 0.02),
        TensorBatches(train, 64, seed=0),
        RatingEvaluator({"valid": valid, "test": valid}, rating_range=(1.0, 5.0)),
        epochs=epochs,
        run_dir=run_dir,
        progress=False,
        device=device,
        **kw,
    )


@pytest.mark.parametrize(("first", "then"), [(DEVICE, "cpu"), ("cpu", DEVICE)])
def test_a_checkpoint_resumes_across_devices(tmp_path: Path, synthetic_ratings, first: str, then: str) -> None:
    _mf_trainer(synthetic_ratings, tmp_path, 2, first).fit()
    saved = load_checkpoint(tmp_path / LAST_CHECKPOINT)
    assert ("cuda_rng" in saved) == (first == DEVICE)  # CUDA's RNG state only when CUDA trained
    assert all(t.device.type == "cpu" for t in saved["model"].values() if isinstance(t, torch.Tensor))

    trainer = _mf_trainer(synthetic_ratings, tmp_path, 3, then)
    trainer._restore()
    assert all(p.device.type == trainer.device.type for p in trainer.model.parameters())
    for name, value in trainer.model.state_dict().items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value.cpu(), saved["model"][name]), name
    for group in trainer.optimizer.state.values():
        assert all(v.device.type in (trainer.device.type, "cpu") for v in group.values() if torch.is_tensor(v))

    resumed = _mf_trainer(synthetic_ratings, tmp_path, 3, then).fit(resume=True)
    assert resumed.metrics["epochs_run"] == 3 and len(resumed.history) == 3
    assert math.isfinite(resumed.metrics["val_rmse"])


def test_an_fp16_run_saves_its_grad_scaler_and_resumes_on_cpu_in_bf16(tmp_path: Path, synthetic_ratings) -> None:
    _mf_trainer(synthetic_ratings, tmp_path, 1, DEVICE, precision="fp16").fit()
    assert load_checkpoint(tmp_path / LAST_CHECKPOINT)["grad_scaler"]["scale"] > 0
    resumed = _mf_trainer(synthetic_ratings, tmp_path, 2, "cpu", precision="bf16").fit(resume=True)
    assert resumed.metrics["epochs_run"] == 2


def test_cuda_training_draws_its_batches_from_pinned_memory(tmp_path: Path, synthetic_ratings) -> None:
    trainer = _mf_trainer(synthetic_ratings, tmp_path, 1, DEVICE)
    batch = next(iter(trainer.batches.epoch(0)))
    assert all(t.is_pinned() for t in batch.values())
    train = {k: v[: v.shape[0] * 8 // 10] for k, v in synthetic_ratings.items()}
    plain = next(iter(TensorBatches(train, 64, seed=0).epoch(0)))
    assert all(torch.equal(batch[k], plain[k]) for k in plain)  # the same examples, in the same order
    assert math.isfinite(trainer.fit().metrics["val_rmse"])


@pytest.mark.parametrize("regularizers", ["[{name: xi-approx}]", "[{name: r-approx}, {name: xi-approx}]"])
def test_lstm_lm_differentiates_its_backward_pass_on_cuda(regularizers: str, request) -> None:
    """xi_approx differentiates the backward pass; cuDNN's LSTM cannot, so the model runs without cuDNN there."""
    built = _built("lstm-lm", [f"train.device={DEVICE}", f"regularizers={regularizers}"], request)
    trainer = built.trainer(None)
    assert trainer.model.twice_differentiable
    trainer.model.train()
    loss, penalty = trainer._train_step(next(iter(built.batches.epoch(0))), 0)
    assert math.isfinite(loss) and math.isfinite(penalty)

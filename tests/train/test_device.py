"""``train.device`` and ``train.precision`` on the CPU: device rules and errors, bf16 training, resume across devices.

The CUDA side (every family on a GPU, a checkpoint round trip between GPU and CPU) is in tests/gpu/.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from embreg.batching.batches import TensorBatches
from embreg.errors import ConfigError
from embreg.models import BiasedMF, ModelOutput
from embreg.optim.optimizers import optimizer_factory
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from embreg.runs.checkpoint import load_checkpoint, save_checkpoint
from embreg.runs.run_dir import LAST_CHECKPOINT, RunDirectory
from embreg.tasks.ratings.evaluation import RatingEvaluator
from embreg.train.device import autocast, check_precision, model_device, move_batch, resolve_device
from embreg.train.seeding import seed_everything
from embreg.train.trainer import Trainer

CPU = torch.device("cpu")


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def one_fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


# ------------------------------------------------------------------------------------------------ device rules
def test_cpu_and_auto_without_cuda_resolve_to_the_cpu(no_cuda: None) -> None:
    assert resolve_device("cpu") == CPU
    assert resolve_device(" CPU ") == CPU
    assert resolve_device("auto") == CPU
    assert resolve_device(None) == CPU
    assert resolve_device(torch.device("cpu")) == CPU


def test_auto_and_cuda_resolve_to_a_numbered_cuda_device(one_fake_gpu: None) -> None:
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device("cuda") == torch.device("cuda", 0)
    assert resolve_device("cuda:0") == torch.device("cuda", 0)


@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "CUDA:1"])
def test_cuda_without_cuda_says_to_use_the_cpu(no_cuda: None, spec: str) -> None:
    with pytest.raises(ConfigError, match=r"no CUDA device.*train\.device=cpu"):
        resolve_device(spec)


def test_a_missing_cuda_index_names_the_devices_there_are(one_fake_gpu: None) -> None:
    with pytest.raises(ConfigError, match=r"1 CUDA device\(s\), cuda:0 to cuda:0"):
        resolve_device("cuda:3")


@pytest.mark.parametrize("spec", ["gpu", "cpu:0", "auto:1", "cuda:", "cuda:x", "", "mps", 3])
def test_a_malformed_device_is_refused_with_the_valid_forms(spec: object) -> None:
    with pytest.raises(ConfigError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
        resolve_device(spec)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------- precision
def test_fp32_and_bf16_run_on_the_cpu_fp16_is_refused() -> None:
    check_precision("fp32", CPU)
    check_precision("bf16", CPU)
    with pytest.raises(ConfigError, match=r"fp16.*CUDA only.*train\.precision=bf16"):
        check_precision("fp16", CPU)
    with pytest.raises(ConfigError, match="fp32, bf16, fp16"):
        check_precision("fp8", CPU)


def test_autocast_lowers_matmuls_in_bf16_only() -> None:
    a = torch.ones(2, 2)
    with autocast(CPU, "bf16"):
        assert (a @ a).dtype == torch.bfloat16
    with autocast(CPU, "fp32"):
        assert (a @ a).dtype == torch.float32


# ------------------------------------------------------------------------------------------------ batch moving
def test_move_batch_keeps_tensors_on_their_device_and_walks_containers() -> None:
    user, index = torch.arange(3), torch.tensor(7)
    batch = {"user": user, "index": index, "pair": (torch.ones(2), [torch.zeros(1)]), "name": "x"}
    moved = move_batch(batch, CPU)
    assert moved["user"] is user and moved["index"] is index and moved["name"] == "x"
    assert isinstance(moved["pair"], tuple) and isinstance(moved["pair"][1], list)


def test_move_batch_moves_tensors_but_not_0_dim_counters() -> None:
    batch = {"input": torch.arange(4).view(2, 2), "index": torch.tensor(3), "reset": torch.tensor(True)}
    moved = move_batch(batch, torch.device("meta"))  # a device every build of torch has
    assert moved["input"].device.type == "meta" and moved["input"].shape == (2, 2)
    assert moved["index"] is batch["index"] and moved["reset"] is batch["reset"]


def test_model_device() -> None:
    assert model_device(nn.Linear(2, 2)) == CPU
    assert model_device(nn.Linear(2, 2, device="meta")).type == "meta"
    assert model_device(nn.ReLU()) == CPU


# ---------------------------------------------------------------------------------------------------- recipes
def test_recipe_keys_default_to_auto_and_fp32() -> None:
    train = load_recipe("mf").train
    assert (train.device, train.precision) == ("auto", "fp32")
    train = load_recipe("mf", ["train.device=cpu", "train.precision=bf16"]).train
    assert (train.device, train.precision) == ("cpu", "bf16")


def test_recipe_keys_are_validated_when_the_recipe_loads(no_cuda: None) -> None:
    with pytest.raises(ConfigError, match=r"train\.device=cpu"):
        load_recipe("mf", ["train.device=cuda"])
    with pytest.raises(ConfigError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
        load_recipe("mf", ["train.device=gpu"])
    with pytest.raises(ConfigError, match=r"train\.precision=bf16"):
        load_recipe("mf", ["train.precision=fp16"])  # auto is the CPU here
    with pytest.raises(ConfigError, match="'fp32', 'bf16', 'fp16'"):
        load_recipe("mf", ["train.precision=fp8"])


def _steps(recipe_name: str, precision: str, steps: int = 2) -> tuple[list[float], dict[str, float], Trainer]:
    smoke = list(load_recipe(recipe_name).adapter.smoke_overrides)
    recipe = load_recipe(recipe_name, [*smoke, "train.device=cpu", f"train.precision={precision}"])
    threads = torch.get_num_threads()
    try:
        built = build_run(recipe)
        trainer = built.trainer(None)
        trainer.model.train()
        batches = iter(built.batches.epoch(0))
        losses = [trainer._train_step(next(batches), 0)[0] for _ in range(steps)]
        return losses, trainer._evaluate("valid"), trainer
    finally:
        torch.set_num_threads(threads)


@pytest.mark.integration
@pytest.mark.parametrize("recipe_name", ["mf", "ctr-adult", "lm-dropout", "sasrec"])
def test_bf16_trains_families_on_the_cpu_with_finite_losses(recipe_name: str) -> None:
    losses, metrics, trainer = _steps(recipe_name, "bf16")
    assert trainer.precision == "bf16" and trainer.device == CPU
    assert all(math.isfinite(loss) for loss in losses), losses
    assert metrics and all(isinstance(v, float) for v in metrics.values())
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())  # weights stay float32
    grads = [p.grad for p in trainer.model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g.coalesce().values() if g.is_sparse else g).all() for g in grads)


@pytest.mark.integration
def test_bf16_changes_the_arithmetic_of_a_model_with_dense_layers() -> None:
    bf16, _, _ = _steps("ctr-adult", "bf16", steps=1)
    fp32, _, _ = _steps("ctr-adult", "fp32", steps=1)
    assert bf16 != fp32 and math.isclose(bf16[0], fp32[0], rel_tol=0.05)


# ---------------------------------------------------------------------------------------------------- trainer
class _Dense(nn.Module):
    """Rating regression through an embedding and a linear layer (autocast lowers the linear layer)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        return ModelOutput(self.out(self.emb(batch["user"])).squeeze(-1) + 3.0)

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        return (output.predictions.float() - batch["rating"]).pow(2).mean()


def _trainer(data, model: nn.Module, run_dir=None, epochs: int = 2, **kw) -> Trainer:
    splits = {"valid": data, "test": data}
    return Trainer(
        model,
        optimizer_factory("adam", 0.02),
        TensorBatches(data, 64, seed=0),
        RatingEvaluator(splits, rating_range=(1.0, 5.0)),
        epochs=epochs,
        run_dir=run_dir,
        progress=False,
        **kw,
    )


def _mf() -> BiasedMF:
    seed_everything(0)
    return BiasedMF.build(30, 40, 4, global_mean=3.0, dropout=0.2)


def test_trainer_refuses_fp16_on_the_cpu(synthetic_ratings) -> None:
    with pytest.raises(ConfigError, match="fp16"):
        _trainer(synthetic_ratings, _mf(), device="cpu", precision="fp16")


def test_trainer_defaults_to_the_models_device(synthetic_ratings) -> None:
    trainer = _trainer(synthetic_ratings, _mf())
    assert trainer.device == CPU and trainer.precision == "fp32"


def test_cpu_fp32_checkpoint_holds_no_cuda_state(tmp_path, synthetic_ratings) -> None:
    _trainer(synthetic_ratings, _mf(), tmp_path, epochs=1, device="cpu").fit()
    state = load_checkpoint(tmp_path / LAST_CHECKPOINT)
    assert "cuda_rng" not in state and "grad_scaler" not in state


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_resumed_cpu_run_matches_an_uninterrupted_one(tmp_path, synthetic_ratings, precision: str) -> None:
    seed_everything(0)
    full = _trainer(synthetic_ratings, _Dense(), tmp_path / "full", epochs=3, precision=precision).fit()
    seed_everything(0)
    _trainer(synthetic_ratings, _Dense(), tmp_path / "cut", epochs=2, precision=precision).fit()
    seed_everything(0)
    resumed = _trainer(synthetic_ratings, _Dense(), tmp_path / "cut", epochs=3, precision=precision).fit(resume=True)
    assert resumed.metrics == full.metrics
    assert [r["val_rmse"] for r in resumed.history] == [r["val_rmse"] for r in full.history]


def test_bf16_training_differs_from_fp32_but_is_close(synthetic_ratings) -> None:
    seed_everything(0)
    fp32 = _trainer(synthetic_ratings, _Dense(), epochs=2).fit().metrics["val_rmse"]
    seed_everything(0)
    bf16 = _trainer(synthetic_ratings, _Dense(), epochs=2, precision="bf16").fit().metrics["val_rmse"]
    assert bf16 != fp32 and math.isclose(bf16, fp32, rel_tol=0.05)


def test_a_checkpoint_written_with_cuda_state_resumes_on_the_cpu(tmp_path, synthetic_ratings) -> None:
    """What a GPU run writes (CPU copies of every tensor plus CUDA's RNG state) resumes on a CPU-only machine."""
    _trainer(synthetic_ratings, _mf(), tmp_path, epochs=1, device="cpu").fit()
    path = tmp_path / LAST_CHECKPOINT
    state = load_checkpoint(path)
    state["cuda_rng"] = torch.zeros(16, dtype=torch.uint8)  # as torch.cuda.get_rng_state() returns it
    save_checkpoint(path, state)
    loaded = RunDirectory(tmp_path).load_checkpoint("last", map_location="cpu")
    assert loaded is not None and loaded["model"]["user_embedding.weight"].device == CPU
    resumed = _trainer(synthetic_ratings, _mf(), tmp_path, epochs=2, device="cpu").fit(resume=True)
    assert resumed.metrics["epochs_run"] == 2 and len(resumed.history) == 2


def test_the_fp16_grad_scaler_path_steps_saves_and_resumes(tmp_path, synthetic_ratings, monkeypatch) -> None:
    """The fp16 branch (scale, unscale before the update transforms and clipping, scaler step, scaler state in
    the checkpoint), run on the CPU by lifting the CUDA-only check; the GPU tests run it on CUDA."""
    import embreg.train.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "check_precision", lambda precision, device: None)
    seed_everything(0)
    trainer = _trainer(synthetic_ratings, _Dense(), tmp_path, epochs=1, precision="fp16", clip_norm=1.0)
    assert trainer._scaler is not None
    first = trainer.fit()
    assert math.isfinite(first.metrics["val_rmse"])
    state = load_checkpoint(tmp_path / LAST_CHECKPOINT)
    assert state["grad_scaler"]["scale"] > 0
    resumed = _trainer(synthetic_ratings, _Dense(), tmp_path, epochs=2, precision="fp16").fit(resume=True)
    assert resumed.metrics["epochs_run"] == 2 and math.isfinite(resumed.metrics["val_rmse"])

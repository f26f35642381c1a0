import json
import math

import pytest
import torch

from embreg.batching.batches import TensorBatches
from embreg.errors import TrainingError
from embreg.models import BiasedMF
from embreg.optim.optimizers import optimizer_factory
from embreg.sse import SSE
from embreg.tasks.ratings.evaluation import RatingEvaluator
from embreg.train.seeding import seed_everything
from embreg.train.trainer import Trainer


class Interrupt(Exception):
    pass


def _make(data, run_dir=None, epochs=6, callbacks=(), regularizers=(), lr=0.02, patience=None, **kw):
    seed_everything(0)
    model = BiasedMF.build(
        30,
        40,
        4,
        global_mean=3.0,
        dropout=0.2,
        l2=0.01,
        user_transform=SSE(30, 0.1, seed=1),
        item_transform=SSE(40, 0.1, seed=2),
    )
    n = data["user"].shape[0]
    train = {k: v[: n * 8 // 10] for k, v in data.items()}
    valid = {k: v[n * 8 // 10 :] for k, v in data.items()}
    evaluator = RatingEvaluator({"train": train, "valid": valid, "test": valid}, rating_range=(1.0, 5.0))
    return Trainer(
        model,
        optimizer_factory("adam", lr),
        TensorBatches(train, 64, seed=0),
        evaluator,
        epochs=epochs,
        run_dir=run_dir,
        progress=False,
        callbacks=callbacks,
        regularizers=regularizers,
        patience=patience,
        **kw,
    )


def test_resumed_run_matches_uninterrupted_run(tmp_path, synthetic_ratings):
    full = _make(synthetic_ratings, tmp_path / "full").fit()

    def stop_after_third(trainer, record):
        if record["epoch"] == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        _make(synthetic_ratings, tmp_path / "cut", callbacks=[stop_after_third]).fit()
    assert (tmp_path / "cut" / "last.safetensors").exists()
    assert not (tmp_path / "cut" / "metrics.json").exists()
    resumed = _make(synthetic_ratings, tmp_path / "cut").fit(resume=True)
    assert resumed.metrics == full.metrics
    assert [r["val_rmse"] for r in resumed.history] == [r["val_rmse"] for r in full.history]
    history = [json.loads(line) for line in (tmp_path / "cut" / "history.jsonl").read_text().splitlines()]
    assert len(history) == 6


def test_resume_of_finished_run_only_reports(tmp_path, synthetic_ratings):
    first = _make(synthetic_ratings, tmp_path / "r", epochs=3).fit()
    again = _make(synthetic_ratings, tmp_path / "r", epochs=3).fit(resume=True)
    assert again.metrics == first.metrics


def test_best_epoch_weights_are_restored_and_reported(tmp_path, synthetic_ratings):
    trainer = _make(synthetic_ratings, tmp_path, epochs=8)
    result = trainer.fit()
    vals = [r["val_rmse"] for r in result.history]
    assert result.best_epoch == min(range(len(vals)), key=vals.__getitem__)
    assert math.isclose(result.metrics["val_rmse"], min(vals), rel_tol=1e-6)
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["test_rmse"] == pytest.approx(result.metrics["test_rmse"])


def test_early_stopping(synthetic_ratings):
    trainer = _make(synthetic_ratings, epochs=200, lr=0.2, patience=2)
    result = trainer.fit()
    assert result.metrics["epochs_run"] < 200
    assert result.metrics["epochs_run"] - 1 - result.best_epoch == 2


def test_min_epochs_holds_off_early_stopping(synthetic_ratings):
    free = _make(synthetic_ratings, epochs=200, lr=0.2, patience=2).fit()
    floor = free.metrics["epochs_run"] + 3
    held = _make(synthetic_ratings, epochs=200, lr=0.2, patience=2, min_epochs=floor).fit()
    assert held.metrics["epochs_run"] >= floor
    assert [r["val_rmse"] for r in held.history[: len(free.history)]] == [r["val_rmse"] for r in free.history]
    with pytest.raises(ValueError, match="min_epochs"):
        _make(synthetic_ratings, epochs=3, min_epochs=4)


def test_nan_loss_raises_clear_error(synthetic_ratings):
    class NaNPenalty:
        def penalty(self, ctx):
            return torch.tensor(float("nan"))

    with pytest.raises(TrainingError, match="epoch 0, step 0"):
        _make(synthetic_ratings, regularizers=[NaNPenalty()]).fit()


def test_regulariser_hooks_run_in_order(synthetic_ratings):
    calls = []

    class Spy:
        def prepare(self, model):
            calls.append("prepare")
            return model

        def penalty(self, ctx):
            calls.append("penalty")
            assert ctx.output is not None and ctx.loss is not None
            return ctx.output.hidden["user_vectors"].pow(2).sum() * 0.0

        def after_backward(self, ctx):
            calls.append("after_backward")
            assert ctx.model.user_embedding.weight.grad is not None

    _make(synthetic_ratings, epochs=1, regularizers=[Spy()]).fit()
    assert calls[0] == "prepare"
    assert calls[1:3] == ["penalty", "after_backward"]


def test_zero_penalty_reproduces_plain_training(synthetic_ratings):
    class Zero:
        def penalty(self, ctx):
            return torch.zeros(())

    plain = _make(synthetic_ratings, epochs=2).fit()
    with_zero = _make(synthetic_ratings, epochs=2, regularizers=[Zero()]).fit()
    assert plain.metrics == with_zero.metrics


def test_clipping_limits_gradient_norm(synthetic_ratings):
    norms = []

    trainer = _make(synthetic_ratings, epochs=1, clip_norm=1e-3)
    original_step = trainer.optimizer.step

    def step(*args, **kwargs):
        grads = [p.grad.norm() for p in trainer.model.parameters() if p.grad is not None]
        norms.append(torch.stack(grads).norm().item())
        return original_step(*args, **kwargs)

    trainer.optimizer.step = step
    trainer.fit()
    assert max(norms) <= 1e-3 * 1.0001


@pytest.mark.parametrize(
    "kwargs", [{"epochs": 0}, {"mode": "up"}, {"monitor": "test_rmse"}, {"patience": 0}, {"clip_norm": -1.0}]
)
def test_bad_arguments(synthetic_ratings, kwargs):
    with pytest.raises(ValueError):
        _make(synthetic_ratings, **kwargs)


def test_amsgrad_is_adam_with_the_amsgrad_maximum():
    optimizer = optimizer_factory("amsgrad", lr=0.01)(torch.nn.Linear(2, 2).parameters())
    assert isinstance(optimizer, torch.optim.Adam) and optimizer.param_groups[0]["amsgrad"] is True
    assert optimizer_factory("adam", lr=0.01)(torch.nn.Linear(2, 2).parameters()).param_groups[0]["amsgrad"] is False

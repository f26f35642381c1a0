"""Progress within an epoch (a per-step bar on stderr) and the trainer's per-step hook."""

from __future__ import annotations

import pytest
import torch

from embreg.batching.batches import TensorBatches
from embreg.models import BiasedMF
from embreg.optim.optimizers import optimizer_factory
from embreg.recipes import load_recipe
from embreg.recipes.shipped import list_recipes
from embreg.tasks.ratings.evaluation import RatingEvaluator
from embreg.train import trainer as trainer_module
from embreg.train.trainer import Trainer


def _make(data, epochs: int, progress: bool = False, **kwargs) -> Trainer:
    torch.manual_seed(0)
    model = BiasedMF.build(30, 40, 4, global_mean=3.0)
    evaluator = RatingEvaluator({"valid": data, "test": data}, rating_range=(1.0, 5.0))
    batches = TensorBatches(data, 64, seed=0)
    return Trainer(
        model, optimizer_factory("adam", 0.02), batches, evaluator, epochs=epochs, progress=progress, **kwargs
    )


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    n = 400
    return {
        "user": torch.randint(0, 30, (n,), generator=g),
        "item": torch.randint(0, 40, (n,), generator=g),
        "rating": torch.randint(1, 6, (n,), generator=g).float(),
    }


def _bars(monkeypatch) -> list[dict]:
    made: list[dict] = []
    real = trainer_module.progress

    def recording(total, desc, **kwargs):
        bar = real(total, desc, **kwargs)
        made.append({"total": total, "desc": desc, "kwargs": kwargs, "bar": bar})
        return bar

    monkeypatch.setattr(trainer_module, "progress", recording)
    return made


def test_progress_shows_each_epochs_steps_on_stderr(data, monkeypatch, capsys):
    made = _bars(monkeypatch)
    trainer = _make(data, epochs=2, progress=True)
    trainer.fit()
    steps = [m for m in made if m["kwargs"].get("unit") == "steps"]
    assert len(steps) == 2 and all(m["kwargs"]["enabled"] for m in steps)
    assert [m["bar"].n for m in steps] == [len(trainer.batches)] * 2  # updated once per step
    assert [m["total"] for m in steps] == [len(trainer.batches)] * 2
    err = capsys.readouterr().err
    assert "epoch 0: " in err and "epochs: 2/2 epochs" in err  # captured stderr is no terminal: plain lines


def test_without_progress_no_bar_shows(data, monkeypatch, capsys):
    made = _bars(monkeypatch)
    _make(data, epochs=1, progress=False).fit()
    assert made and not any(m["kwargs"]["enabled"] for m in made)
    assert capsys.readouterr().err == ""


def test_every_shipped_recipe_shows_progress_within_its_epochs():
    off = [name for name in list_recipes() if not load_recipe(name).train.progress]
    assert off == [], "these recipes train with train.progress=false"


def test_a_step_hook_gets_every_step_with_its_loss_and_learning_rate(data):
    seen: list[dict] = []
    trainer = _make(data, epochs=2, step_callbacks=[lambda t, record: seen.append(record)])
    result = trainer.fit()
    per_epoch = len(trainer.batches)
    assert [r["step"] for r in seen] == list(range(1, 2 * per_epoch + 1))
    assert [r["epoch"] for r in seen] == [0] * per_epoch + [1] * per_epoch
    assert all(r["lr"] == pytest.approx(0.02) for r in seen)
    first_epoch = [r["train_loss"] for r in seen[:per_epoch]]
    assert sum(first_epoch) / per_epoch == pytest.approx(result.history[0]["train_loss"])

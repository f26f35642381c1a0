"""Every fine-tuning regulariser plugs into embreg's own Trainer (the plain loop) and changes training."""

from __future__ import annotations

import pytest
import torch

from embreg.batching.batches import TensorBatches
from embreg.optim.warmup import warmup_adamw_factory
from embreg.regularizers import L2SP, LNSR, R3F, SMART, LayerNoise, Mixout
from embreg.tasks.text.evaluation import TextEvaluator
from embreg.train.trainer import Trainer
from tests.helpers.finetune_tiny import tiny_batch, tiny_classifier

REGULARIZERS = {
    "lnsr": lambda: LNSR(sigma=0.5, start_layer=1),
    "noise": lambda: LayerNoise(sigma=0.5),
    "l2sp": lambda: L2SP(alpha=1.0, beta=0.1),
    "mixout": lambda: Mixout(p=0.5),
    "smart": lambda: SMART(weight=1.0, epsilon=0.1, step_size=0.1),
    "r3f": lambda: R3F(weight=1.0, sigma=0.5),
}
HAS_PENALTY = {"lnsr", "l2sp", "smart", "r3f"}


def _data() -> dict[str, torch.Tensor]:
    parts = [tiny_batch(batch=8, seed=s) for s in range(2)]
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


def _fit(regularizers: list) -> tuple[Trainer, dict]:
    data = _data()
    torch.manual_seed(0)
    model = tiny_classifier(dropout=0.1)
    trainer = Trainer(
        model,
        warmup_adamw_factory(1e-3, total_steps=4),
        TensorBatches(data, 8, seed=0),
        TextEvaluator({"valid": data, "test": data}, num_labels=2),
        epochs=2,
        monitor="val_accuracy",
        mode="max",
        regularizers=regularizers,
        progress=False,
    )
    return trainer, trainer.fit().metrics


@pytest.mark.parametrize("name", sorted(REGULARIZERS))
def test_regulariser_trains_in_the_plain_loop(name: str) -> None:
    plain_trainer, _ = _fit([])
    trainer, metrics = _fit([REGULARIZERS[name]()])
    assert 0.0 <= metrics["test_accuracy"] <= 1.0 and metrics["epochs_run"] == 2
    penalties = [record["train_penalty"] for record in trainer.history]
    if name in HAS_PENALTY:
        assert all(p > 0 for p in penalties), penalties
    else:
        assert penalties == [0.0, 0.0]
    changed = [
        not torch.equal(a, b)
        for a, b in zip(plain_trainer.model.state_dict().values(), trainer.model.state_dict().values())
    ]
    assert any(changed), f"{name} left training unchanged"

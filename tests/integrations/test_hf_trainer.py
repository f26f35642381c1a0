"""The Hugging Face Trainer adapter: every regulariser end to end on a tiny run; hooks in the right places."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import TrainingArguments

from embreg.integrations.hf_trainer import RegularizedTrainer, regularized_loss
from embreg.regularizers import L2SP, LNSR, R3F, SMART, LayerNoise, Mixout, MixoutLinear
from tests.helpers.finetune_tiny import one_thread, tiny_batch, tiny_classifier, tiny_hf_classifier  # noqa: F401 (one_thread: autouse)

REGULARIZERS = {
    "lnsr": lambda: LNSR(sigma=0.5),
    "noise": lambda: LayerNoise(sigma=0.5),
    "l2sp": lambda: L2SP(alpha=1.0, beta=0.1),
    "mixout": lambda: Mixout(p=0.5),
    "smart": lambda: SMART(weight=1.0, epsilon=0.1, step_size=0.1, bregman_weight=0.5),
    "r3f": lambda: R3F(weight=1.0, sigma=0.5),
}


class Rows(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.batch = tiny_batch(batch=8, seed=3)

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {k: v[i] for k, v in self.batch.items()}


def _args(tmp_path: Path) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )


class CountingHook:
    """A regulariser with only ``after_backward``: records that gradients exist when it runs."""

    def __init__(self) -> None:
        self.calls: list[bool] = []

    def after_backward(self, ctx) -> None:
        self.calls.append(any(p.grad is not None for p in ctx.model.parameters()))


@pytest.mark.parametrize("name", sorted(REGULARIZERS))
def test_each_regulariser_trains_a_hugging_face_model(tmp_path: Path, name: str) -> None:
    model = tiny_hf_classifier(dropout=0.1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    hook = CountingHook()
    trainer = RegularizedTrainer(
        model=model, args=_args(tmp_path), train_dataset=Rows(), regularizers=[REGULARIZERS[name](), hook]
    )
    trainer.train()
    assert hook.calls == [True, True]
    if name in ("lnsr", "l2sp", "smart", "r3f"):
        assert trainer.last_penalty > 0
    if name == "mixout":
        assert isinstance(trainer.model.bert.encoder.layer[0].attention.self.query, MixoutLinear)
    after = trainer.model.state_dict()
    assert not torch.equal(
        before["bert.encoder.layer.0.output.dense.weight"], after["bert.encoder.layer.0.output.dense.weight"]
    )


def test_embreg_models_work_inside_the_hugging_face_trainer(tmp_path: Path) -> None:
    model = tiny_classifier(dropout=0.1)
    trainer = RegularizedTrainer(
        model=model, args=_args(tmp_path), train_dataset=Rows(), eval_dataset=Rows(), regularizers=[LNSR(sigma=0.5)]
    )
    trainer.train()
    assert trainer.last_penalty > 0 and not trainer.args.remove_unused_columns
    assert "eval_loss" in trainer.evaluate()


def test_regularized_loss_adds_the_penalties_in_training_mode_only() -> None:
    model = tiny_hf_classifier()
    batch = tiny_batch()
    model.train()
    total, outputs, penalty = regularized_loss(model, batch, [R3F(weight=1.0, sigma=0.5)])
    torch.testing.assert_close(total, outputs.loss + penalty)
    assert penalty.item() > 0 and outputs.hidden_states is not None
    model.eval()
    total, outputs, penalty = regularized_loss(model, batch, [R3F(weight=1.0, sigma=0.5)])
    assert penalty.item() == 0.0 and outputs.hidden_states is None

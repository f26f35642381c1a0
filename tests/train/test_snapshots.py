"""Kept epochs (checkpoint averaging, snapshot ensembles): the mean of weights and what stays on disk."""

from __future__ import annotations

import pytest
import torch

from embreg.errors import DataError
from embreg.train.snapshots import EpochSnapshots, average_states


class _Trainer:
    def __init__(self) -> None:
        self.model = torch.nn.Linear(2, 1)


def test_average_states_is_the_elementwise_mean_of_float_tensors() -> None:
    states = [{"w": torch.full((2,), float(i)), "steps": torch.tensor(i)} for i in range(4)]
    averaged = average_states(states)
    assert torch.equal(averaged["w"], torch.full((2,), 1.5))
    assert averaged["steps"] == 3  # integer buffers come from the last state
    with pytest.raises(ValueError, match="different keys"):
        average_states([{"a": torch.zeros(1)}, {"b": torch.zeros(1)}])
    with pytest.raises(ValueError, match="no states"):
        average_states([])


def test_snapshots_keep_the_last_k_epochs_and_the_cycle_ends_on_disk(tmp_path) -> None:
    trainer = _Trainer()
    snapshots = EpochSnapshots(tmp_path, keep_last=2, epochs=[1])
    weights = {}
    for epoch in range(5):
        with torch.no_grad():
            trainer.model.weight.fill_(epoch)
        weights[epoch] = trainer.model.weight.detach().clone()
        snapshots(trainer, {"epoch": epoch})
    assert snapshots.epochs() == [1, 3, 4]
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == [
        "epoch-1.safetensors",
        "epoch-3.safetensors",
        "epoch-4.safetensors",
    ]
    assert torch.equal(snapshots.state(3)["weight"], weights[3])
    assert snapshots.last(2, before=5) == [3, 4]
    assert EpochSnapshots(tmp_path).epochs() == [1, 3, 4]  # a resumed run finds them
    with pytest.raises(DataError, match="no snapshot of epoch 0"):
        snapshots.state(0)
    snapshots.drop_all()
    assert not (tmp_path / "snapshots").exists()

"""Checkpoints carry the sha256 of their tensor bytes; flipped payload bytes are refused, naming the file."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import safetensors.torch
import torch

from embreg.batching.batches import TensorBatches
from embreg.errors import DataError
from embreg.models import BiasedMF
from embreg.optim.optimizers import optimizer_factory
from embreg.runs.checkpoint import atomic_write_bytes, load_checkpoint, save_checkpoint, tensor_checksum
from embreg.tasks.ratings.evaluation import RatingEvaluator
from embreg.train.trainer import LAST_CHECKPOINT, Trainer


def _state() -> dict:
    torch.manual_seed(0)
    return {
        "model": {"emb.weight": torch.randn(50, 8), "bias": torch.zeros(50, dtype=torch.bfloat16)},
        "mask": torch.tensor([True, False]),
        "step": 3,
    }


def _payload_start(data: bytes) -> int:
    return 8 + int.from_bytes(data[:8], "little")


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    atomic_write_bytes(path, bytes(data))


def test_saved_checkpoint_holds_the_checksum_of_its_tensors(tmp_path) -> None:
    path = save_checkpoint(tmp_path / "c.safetensors", _state())
    data = path.read_bytes()
    metadata = json.loads(data[8 : _payload_start(data)])["__metadata__"]
    assert metadata["tensor_sha256"] == tensor_checksum(safetensors.torch.load(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a verified checkpoint loads without a word
        assert torch.equal(load_checkpoint(path)["model"]["emb.weight"], _state()["model"]["emb.weight"])


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_flipped_payload_byte_is_a_checksum_error_naming_the_file(tmp_path, where) -> None:
    path = save_checkpoint(tmp_path / "best.safetensors", _state())
    data = path.read_bytes()
    start = _payload_start(data)
    _flip(path, {"first": start, "middle": (start + len(data)) // 2, "last": len(data) - 1}[where])
    with pytest.raises(DataError, match=r"best\.safetensors' fails its checksum: its tensor bytes are not those"):
        load_checkpoint(path)


def test_checksum_covers_keys_dtypes_and_shapes() -> None:
    weight = torch.arange(6.0)
    reference = tensor_checksum({"w": weight})
    assert tensor_checksum({"v": weight}) != reference
    assert tensor_checksum({"w": weight.reshape(2, 3)}) != reference
    assert tensor_checksum({"w": weight.view(torch.int32)}) != reference


def test_checkpoint_without_a_checksum_loads_with_a_warning(tmp_path) -> None:
    """Checkpoints of older versions carry no checksum: they load, unverified, and the warning says so."""
    path = save_checkpoint(tmp_path / "old.safetensors", _state())
    data = path.read_bytes()
    metadata = json.loads(data[8 : _payload_start(data)])["__metadata__"]
    del metadata["tensor_sha256"]
    atomic_write_bytes(path, safetensors.torch.save(safetensors.torch.load(data), metadata=metadata))
    with pytest.warns(UserWarning, match=r"old\.safetensors' carries no tensor_sha256 .* loaded unverified"):
        state = load_checkpoint(path)
    assert state["step"] == 3 and torch.equal(state["mask"], torch.tensor([True, False]))


def test_resume_from_a_flipped_checkpoint_is_a_data_error_not_a_divergence(tmp_path, synthetic_ratings) -> None:
    def trainer() -> Trainer:
        evaluator = RatingEvaluator({"valid": synthetic_ratings, "test": synthetic_ratings}, rating_range=(1.0, 5.0))
        return Trainer(
            BiasedMF.build(30, 40, 4, global_mean=3.0),
            optimizer_factory("adam", 0.01),
            TensorBatches(synthetic_ratings, 64, seed=0),
            evaluator,
            epochs=3,
            run_dir=run_dir,
            progress=False,
        )

    run_dir = tmp_path / "run"
    trainer().fit()
    path = run_dir / LAST_CHECKPOINT
    _flip(path, len(path.read_bytes()) - 1)
    with pytest.raises(DataError, match=r"last\.safetensors' fails its checksum"):
        trainer().fit(resume=True)

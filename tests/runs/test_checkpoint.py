"""Tests of ``embreg.runs.checkpoint``: atomic writes and checkpoint round trips."""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

from embreg.errors import DataError
from embreg.runs import checkpoint
from embreg.runs.checkpoint import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    load_checkpoint,
    save_checkpoint,
)


def leftovers(directory: Path) -> list[str]:
    """Temporary files the atomic writer may have left behind."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_atomic_write_bytes_and_text_create_parents_and_replace(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.txt"
    assert atomic_write_bytes(target, b"one") == target
    assert target.read_bytes() == b"one"
    atomic_write_text(target, "two\r\nlines é")
    assert target.read_bytes() == "two\r\nlines é".encode()
    assert leftovers(target.parent) == []


def test_atomic_write_uses_normal_file_permissions(tmp_path: Path) -> None:
    target = atomic_write_text(tmp_path / "x.txt", "x")
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask


def test_atomic_write_rejects_wrong_types(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="data must be bytes, got str"):
        atomic_write_bytes(tmp_path / "x", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text must be str, got bytes"):
        atomic_write_text(tmp_path / "x", b"bytes")  # type: ignore[arg-type]
    assert not (tmp_path / "x").exists()


def test_atomic_write_json_is_sorted_indented_and_handles_numpy_tensors_paths(tmp_path: Path) -> None:
    obj = {"b": np.float32(0.5), "a": torch.tensor(2.0), "p": Path("x/y"), "arr": np.arange(2), "n": float("nan")}
    target = atomic_write_json(tmp_path / "m.json", obj)
    text = target.read_text()
    assert text.startswith('{\n  "a": 2.0,\n  "arr": [\n')
    assert text.endswith("}\n")
    loaded = json.loads(text)
    assert loaded["b"] == 0.5 and loaded["p"] == "x/y" and loaded["arr"] == [0, 1]
    assert math.isnan(loaded["n"])


def test_atomic_write_json_unserialisable_keeps_previous_file(tmp_path: Path) -> None:
    target = atomic_write_json(tmp_path / "m.json", {"ok": 1})
    with pytest.raises(TypeError, match="object of type object is not JSON serialisable"):
        atomic_write_json(target, {"bad": object()})
    assert json.loads(target.read_text()) == {"ok": 1}
    assert leftovers(tmp_path) == []


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    model = torch.nn.Linear(3, 2)
    state = {"model": model.state_dict(), "epoch": 4, "history": [{"loss": 0.5}], "rng": torch.get_rng_state()}
    path = save_checkpoint(tmp_path / "best.safetensors", state)
    loaded = load_checkpoint(path)
    assert loaded["epoch"] == 4 and loaded["history"] == [{"loss": 0.5}]
    for key, value in model.state_dict().items():
        assert torch.equal(loaded["model"][key], value)
    assert torch.equal(loaded["rng"], state["rng"])
    assert loaded["model"]["weight"].device.type == "cpu"


def test_interrupted_save_keeps_previous_checkpoint_and_removes_temp(tmp_path: Path, monkeypatch) -> None:
    path = save_checkpoint(tmp_path / "best.safetensors", {"epoch": 1, "w": torch.ones(3)})
    before = path.read_bytes()

    def interrupt(fd):
        raise KeyboardInterrupt  # the temporary file is written but not yet synced/renamed (BaseException)

    monkeypatch.setattr(checkpoint.os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"epoch": 2, "w": torch.zeros(3)})
    monkeypatch.undo()

    assert path.read_bytes() == before
    assert load_checkpoint(path)["epoch"] == 1
    assert leftovers(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.safetensors"]


def test_failed_first_save_leaves_no_target(tmp_path: Path, monkeypatch) -> None:
    def fail(fd):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.os, "fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path / "new.safetensors", {"epoch": 0})
    assert list(tmp_path.iterdir()) == []


def test_unstorable_state_is_a_type_error_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"'history/0/when'.*cannot store a builtins\.object"):
        save_checkpoint(tmp_path / "x.safetensors", {"history": [{"when": object()}]})
    with pytest.raises(TypeError, match="dict key"):
        save_checkpoint(tmp_path / "x.safetensors", {"state": {(1, 2): 3}})
    with pytest.raises(TypeError, match="cannot store dtype torch.complex64"):
        save_checkpoint(tmp_path / "x.safetensors", {"z": torch.zeros(2, dtype=torch.complex64)})
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(TypeError, match="reference cycle"):
        save_checkpoint(tmp_path / "x.safetensors", {"c": cyclic})
    assert list(tmp_path.iterdir()) == []


def test_failed_replace_removes_temp(tmp_path: Path, monkeypatch) -> None:
    path = atomic_write_text(tmp_path / "r.md", "old")

    def refuse(src, dst):
        raise OSError("replace refused")

    monkeypatch.setattr(checkpoint.os, "replace", refuse)
    with pytest.raises(OSError, match="replace refused"):
        atomic_write_text(path, "new")
    assert path.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_save_checkpoint_rejects_non_dict(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="state must be a dict, got list"):
        save_checkpoint(tmp_path / "x.safetensors", [1, 2])  # type: ignore[arg-type]


def test_load_missing_checkpoint_names_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"checkpoint not found: .*missing\.safetensors"):
        load_checkpoint(tmp_path / "missing.safetensors")
    with pytest.raises(DataError, match="is not a file"):
        load_checkpoint(tmp_path)


def test_load_corrupt_or_truncated_checkpoint_raises_data_error(tmp_path: Path) -> None:
    garbage = atomic_write_bytes(tmp_path / "garbage.safetensors", b"not a checkpoint at all")
    with pytest.raises(DataError, match=r"garbage\.safetensors' is corrupt"):
        load_checkpoint(garbage)
    good = save_checkpoint(tmp_path / "good.safetensors", {"w": torch.ones(100)})
    truncated = atomic_write_bytes(tmp_path / "truncated.safetensors", good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(DataError, match=r"truncated\.safetensors' is corrupt"):
        load_checkpoint(truncated)


def test_load_checkpoint_holding_non_dict_raises(tmp_path: Path) -> None:
    skeleton = json.dumps({"$": "list", "items": [1, 2]})
    data = safetensors.torch.save(
        {}, metadata={"format": "embreg-checkpoint", "format_version": "1", "embreg_state": skeleton}
    )
    path = atomic_write_bytes(tmp_path / "list.safetensors", data)
    with pytest.raises(DataError, match=r"list\.safetensors' holds list, expected a dict"):
        load_checkpoint(path)

"""Tests of ``embreg.train.checkpoint``: atomic writes and checkpoint round trips."""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from embreg.errors import DataError
from embreg.train import checkpoint
from embreg.train.checkpoint import (
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
    assert target.read_bytes() == "two\r\nlines é".encode("utf-8")
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
    path = save_checkpoint(tmp_path / "best.pt", state)
    loaded = load_checkpoint(path)
    assert loaded["epoch"] == 4 and loaded["history"] == [{"loss": 0.5}]
    for key, value in model.state_dict().items():
        assert torch.equal(loaded["model"][key], value)
    assert torch.equal(loaded["rng"], state["rng"])
    assert loaded["model"]["weight"].device.type == "cpu"


def test_interrupted_save_keeps_previous_checkpoint_and_removes_temp(tmp_path: Path, monkeypatch) -> None:
    path = save_checkpoint(tmp_path / "best.pt", {"epoch": 1, "w": torch.ones(3)})
    before = path.read_bytes()
    real_save = torch.save

    def save_half_then_fail(obj, handle, *args, **kwargs):
        handle.write(b"PARTIAL" * 100)  # a half-written file...
        raise KeyboardInterrupt  # ...then an interruption (BaseException, not Exception)

    monkeypatch.setattr(torch, "save", save_half_then_fail)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"epoch": 2, "w": torch.zeros(3)})
    monkeypatch.setattr(torch, "save", real_save)

    assert path.read_bytes() == before
    assert load_checkpoint(path)["epoch"] == 1
    assert leftovers(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.pt"]


def test_failed_first_save_leaves_no_target(tmp_path: Path, monkeypatch) -> None:
    def fail(obj, handle, *args, **kwargs):
        handle.write(b"x")
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch, "save", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        save_checkpoint(tmp_path / "new.pt", {"epoch": 0})
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
        save_checkpoint(tmp_path / "x.pt", [1, 2])  # type: ignore[arg-type]


def test_load_missing_checkpoint_names_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"checkpoint not found: .*missing\.pt"):
        load_checkpoint(tmp_path / "missing.pt")
    with pytest.raises(DataError, match="is not a file"):
        load_checkpoint(tmp_path)


def test_load_corrupt_or_truncated_checkpoint_raises_data_error(tmp_path: Path) -> None:
    garbage = atomic_write_bytes(tmp_path / "garbage.pt", b"not a checkpoint at all")
    with pytest.raises(DataError, match=r"garbage\.pt' is corrupt"):
        load_checkpoint(garbage)
    good = save_checkpoint(tmp_path / "good.pt", {"w": torch.ones(100)})
    truncated = atomic_write_bytes(tmp_path / "truncated.pt", good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(DataError, match=r"truncated\.pt' is corrupt"):
        load_checkpoint(truncated)


def test_load_checkpoint_holding_non_dict_raises(tmp_path: Path) -> None:
    path = tmp_path / "list.pt"
    torch.save([1, 2], path)
    with pytest.raises(DataError, match="holds list, expected a dict"):
        load_checkpoint(path)

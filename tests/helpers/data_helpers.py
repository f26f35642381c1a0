"""Helpers for the data tests: fake sources, tiny datasets, zip files."""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Sequence
from pathlib import Path

from embreg.data.registry import DatasetFile, DatasetPart, DatasetRegistry, DatasetSpec
from embreg.data.sources import Source

TOY_FILES = {"a.txt": b"alpha\n", "b.txt": b"beta\n"}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


class FakeSource(Source):
    """Writes given bytes, or fails in a chosen way; records every call in ``calls``."""

    def __init__(
        self,
        label: str,
        files: dict[str, bytes] | None = None,
        *,
        error: BaseException | None = None,
        byte_exact: bool = True,
        calls: list[str] | None = None,
    ) -> None:
        self.label = label
        self.files = files or {}
        self.error = error
        self.byte_exact = byte_exact
        self.calls = calls if calls is not None else []

    def describe(self) -> str:
        return f"fake {self.label}"

    def provide(self, files: Sequence[str], dest: Path, *, scratch: Path, progress: bool) -> None:
        self.calls.append(self.label)
        for name in files:
            if name in self.files:
                (dest / name).write_bytes(self.files[name])
                if self.error is not None:
                    raise self.error  # fail after writing a file: a half-done fetch
        if self.error is not None:
            raise self.error


def toy_spec(*sources: Source, name: str = "toy") -> DatasetSpec:
    files = tuple(DatasetFile(n, sha(data)) for n, data in TOY_FILES.items())
    return DatasetSpec(name, "a toy dataset", (DatasetPart("all", files, tuple(sources)),))


def toy_registry(*sources: Source) -> DatasetRegistry:
    registry = DatasetRegistry()
    registry.register(toy_spec(*sources))
    return registry


def leftovers(home: Path) -> list[str]:
    """Names under the datasets root other than finished dataset directories' contents."""
    root = home / "datasets"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


TINY_ATOMIC = {
    "ml-100k.inter": "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
    "1\t1\t5\t100\n1\t2\t3\t101\n2\t3\t4\t102\n3\t1\t1\t103\n4\t5\t2\t104\n2\t4\t5\t105\n",
    "ml-100k.item": "item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq\n"
    "1\tAlpha, The\t1995\tAction Comedy\n2\tBeta\t1996\tAction\n3\tGamma (Gamma)\t1997\tComedy Drama\n"
    '4\tunkonwn\tunkonwn\tunknown\n5\tEpsilon "E"\t1990\tDrama Comedy\n',
    "ml-100k.user": "user_id:token\tage:token\tgender:token\toccupation:token\tzip_code:token\n"
    "1\t24\tM\tstudent\t01234\n2\t27\tF\tstudent\t55414\n3\t45\tM\tengineer\tT8H1N\n"
    "4\t41\tF\tengineer\t90210\n",
    "ml-100k.link": "item_id:token\tentity_id:token\n1\tm.f1\n2\tm.f2\n3\tm.f3\n4\tm.f4\n",
    "ml-100k.kg": "head_id:token\trelation_id:token\ttail_id:token\n"
    "m.f1\tfilm.film.actor\tm.a1\n"
    "m.f2\tfilm.film.actor\tm.a1\n"
    "m.d1\tfilm.director.film\tm.f2\n"
    "m.d1\tfilm.director.film\tm.f3\n"
    "m.f3\tfilm.film.directed_by\tm.d1\n"
    "m.w1\tfilm.writer.film\tm.f1\n"
    "m.p1\tfilm.producer.film\tm.f1\n"
    "m.p1\tfilm.producer.film\tm.f2\n"
    "m.p1\tfilm.producer.film\tm.f3\n"
    "m.f4\tfilm.film.genre\tm.g1\n"
    "m.f1\tfilm.film.genre\tm.g1\n"
    "m.f3\tfilm.film.sequel\tm.f4\n",
}
"""A five-item, four-user ML-100k look-alike in RecBole's atomic layout (item 5 has no KG entity)."""


def write_tiny_atomic(directory: Path, files: dict[str, str] | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (files or TINY_ATOMIC).items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory

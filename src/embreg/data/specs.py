"""What a dataset is made of: canonical files with checksums, grouped in parts, each with ordered sources."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from embreg.data.sources import Source
from embreg.errors import DataError


@dataclass(frozen=True)
class DatasetFile:
    """One canonical file: its name inside the dataset directory and its sha256 (hex)."""

    name: str
    sha256: str

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or self.name.startswith("."):
            raise DataError(f"file name {self.name!r} must be non-empty, without '/' and not start with '.'")
        if len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256):
            raise DataError(f"sha256 of {self.name!r} must be 64 lower-case hex digits, got {self.sha256!r}")


@dataclass(frozen=True)
class DatasetPart:
    """Files fetched together, with the sources to try for them, in order.

    Args:
        name: short label used in messages (e.g. ``"ratings"``).
        files: canonical files of this part.
        sources: tried first to last; the first that yields verified files wins.
    """

    name: str
    files: tuple[DatasetFile, ...]
    sources: tuple[Source, ...]

    def __post_init__(self) -> None:
        if not self.files:
            raise DataError(f"dataset part {self.name!r} has no files")
        if not self.sources:
            raise DataError(f"dataset part {self.name!r} has no sources")


@dataclass(frozen=True)
class DatasetSpec:
    """A named dataset: a description and the parts that make it up.

    Example:
        >>> from embreg.data.sources import PyPIWheelSource
        >>> part = DatasetPart("all", (DatasetFile("a.txt", "0" * 64),),
        ...                    (PyPIWheelSource("pkg==1.0", "1" * 64, {"a.txt": "pkg/a.txt"}),))
        >>> DatasetSpec("toy", "a toy", (part,)).file_names
        ('a.txt',)
    """

    name: str
    description: str
    parts: tuple[DatasetPart, ...]

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or self.name.startswith("."):
            raise DataError(f"dataset name {self.name!r} must be non-empty, without '/' and not start with '.'")
        names = [f.name for part in self.parts for f in part.files]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise DataError(f"dataset {self.name!r} lists files {duplicates} in more than one part")

    @property
    def file_names(self) -> tuple[str, ...]:
        """Canonical file names of every part, in order."""
        return tuple(f.name for part in self.parts for f in part.files)


@dataclass(frozen=True)
class DatasetInfo:
    """What ``list_datasets`` reports about one dataset.

    Attributes:
        name: registry name.
        description: one line.
        directory: where its canonical files live once fetched.
        files: canonical file names.
        sources: ``"<part>: <source description>"`` in the order they are tried.
        cached: whether every file is present and verified.
    """

    name: str
    description: str
    directory: Path
    files: tuple[str, ...]
    sources: tuple[str, ...]
    cached: bool

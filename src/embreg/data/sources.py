"""Places a dataset's canonical files can come from: an archive at a URL, or a wheel on PyPI.

A :class:`Source` writes canonical files into a directory the registry gives it;
the registry then checks them and moves them into the cache atomically (see
:mod:`embreg.data.registry`). Each source verifies its own download (the
archive's or the wheel's sha256) before it extracts anything.

Two kinds of output:

- *byte-exact* sources copy files out unchanged (:class:`PyPIWheelSource`,
  :class:`UrlArchiveSource` with ``members``); the registry checks each file
  against the dataset's canonical sha256.
- *converting* sources rewrite another layout into the canonical one
  (:class:`UrlArchiveSource` with ``converter``); their output is not
  byte-identical to the canonical copy, so the archive checksum is what vouches
  for it, and the registry records the converted files' sha256 in the cache's
  manifest so that later runs can still verify them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.request
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from embreg.data.cache import downloads_dir, sha256_file
from embreg.errors import DataError
from embreg.progress import progress as progress_bar

ArchiveConverter = Callable[[zipfile.ZipFile, Path], None]
"""Writes canonical files into the directory from an opened archive."""

_USER_AGENT = "embreg-data-fetch"


class Source(ABC):
    """One place the files of a dataset part can be fetched from."""

    byte_exact: bool = True
    """True when the files written are exactly the canonical bytes (checked against their sha256)."""

    @abstractmethod
    def describe(self) -> str:
        """One line naming the source, for error messages and ``embreg list``."""

    @abstractmethod
    def provide(self, files: Sequence[str], dest: Path, *, scratch: Path, progress: bool) -> None:
        """Write each canonical file named in ``files`` into ``dest``.

        Args:
            files: canonical file names wanted.
            dest: empty directory to write them into.
            scratch: directory for downloads; shared by the sources of one fetch,
                so a second part from the same wheel does not download it again.
            progress: show progress bars.

        Raises:
            Exception: any failure; the registry records it and tries the next source.
        """

    def manual_hint(self) -> str | None:
        """How a user can supply this source's download by hand, or None."""
        return None


def download_url(url: str, target: Path, *, timeout: float, progress: bool) -> Path:
    """Download ``url`` to ``target`` (written as ``target.part``, then renamed).

    Args:
        url: http(s) or file URL.
        target: destination path; its directory must exist.
        timeout: seconds allowed for connecting and for each read.
        progress: show progress sized from Content-Length (a bar on a terminal, else a line per quarter).

    Returns:
        ``target``.

    Example:
        >>> download_url("file:///etc/hostname", Path("/tmp/h"), timeout=5, progress=False).exists()
        True
    """
    partial = target.with_name(target.name + ".part")
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        total = response.headers.get("Content-Length")
        with (
            open(partial, "wb") as out,
            progress_bar(
                int(total) if total and total.isdigit() else None,
                target.name,
                unit="B",
                enabled=progress,
                every=0.25,
                leave=False,
                unit_scale=True,
            ) as bar,
        ):
            for block in iter(lambda: response.read(1 << 16), b""):
                out.write(block)
                bar.update(len(block))
    partial.replace(target)
    return target


def pip_download(
    requirement: str, dest: Path, *, timeout: float, progress: bool, extra_args: Sequence[str] = ()
) -> Path:
    """Download one wheel with ``python -m pip download`` (pip's configured index, no dependencies).

    Using pip rather than an HTTP client means mirrors, proxies and certificates
    configured for pip apply here too.

    Args:
        requirement: a pinned requirement, e.g. ``"recbole==1.2.1"``.
        dest: directory to download into.
        timeout: seconds allowed for the whole pip run.
        progress: print a one-line notice (pip's own output is captured for error messages).
        extra_args: more pip options, e.g. a fixed platform tag (``--platform ... --python-version ... --abi ...``).

    Returns:
        Path of the downloaded wheel.
    """
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        *extra_args,
        requirement,
        "-d",
        str(dest),
    ]
    if progress:
        print(f"embreg: downloading {requirement} with pip {' '.join(extra_args)}".rstrip(), file=sys.stderr)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise DataError(f"pip download {requirement} took longer than {timeout:.0f} s") from exc
    if result.returncode != 0:
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise DataError(f"pip download {requirement} exited with status {result.returncode}: {tail}")
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise DataError(f"pip download {requirement} left {len(wheels)} wheels in {dest}; expected exactly 1")
    return wheels[0]


def verify_sha256(path: Path, expected: str, what: str) -> None:
    """Raise :class:`DataError` unless ``path`` has sha256 ``expected``.

    Args:
        path: file to check.
        expected: lower-case hex digest.
        what: how to name the file in the message (e.g. ``"archive ml-100k.zip"``).
    """
    actual = sha256_file(path)
    if actual != expected:
        raise DataError(f"{what} at {path} has sha256 {actual}; expected {expected}")


def extract_members(archive: zipfile.ZipFile, members: Mapping[str, str], dest: Path) -> None:
    """Copy archive members to ``dest`` under their canonical names.

    Args:
        archive: an open zip file (wheels are zip files).
        members: ``{canonical file name: member path inside the archive}``.
        dest: directory to write into.
    """
    present = set(archive.namelist())
    missing = [member for member in members.values() if member not in present]
    if missing:
        raise DataError(f"archive {archive.filename} lacks members {missing}")
    for canonical, member in members.items():
        with archive.open(member) as src, open(dest / canonical, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)


class UrlArchiveSource(Source):
    """A zip archive at a URL, with its own sha256; members copied or converted to canonical files.

    Before downloading, a copy at ``$EMBREG_HOME/downloads/<archive name>`` is used
    when present (for machines without access to the URL); it must match the
    same sha256.

    Args:
        url: where the archive lives.
        sha256: the archive's published sha256 (hex).
        members: ``{canonical name: member path}`` for archives that hold the
            canonical files as they are (byte-exact).
        converter: for archives in another layout: writes the canonical files
            into a directory from the opened archive. Exactly one of
            ``members`` and ``converter`` is given.
        timeout: seconds for connecting and for each read (short, so an
            unreachable host fails fast and the next source is tried).

    Example:
        >>> src = UrlArchiveSource("https://example.org/d.zip", "0" * 64, members={"d.csv": "d/d.csv"})
        >>> src.describe()
        'https://example.org/d.zip (zip, sha256 00000000…)'
    """

    def __init__(
        self,
        url: str,
        sha256: str,
        *,
        members: Mapping[str, str] | None = None,
        converter: ArchiveConverter | None = None,
        timeout: float = 15.0,
    ) -> None:
        if (members is None) == (converter is None):
            raise DataError("UrlArchiveSource needs exactly one of members= and converter=")
        if timeout <= 0:
            raise DataError(f"timeout={timeout} must be > 0 seconds")
        self.url = url
        self.sha256 = sha256.lower()
        self.members = dict(members) if members is not None else None
        self.converter = converter
        self.timeout = timeout
        self.byte_exact = members is not None

    @property
    def archive_name(self) -> str:
        """File name of the archive (last part of the URL)."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    def describe(self) -> str:
        kind = "zip" if self.byte_exact else "zip, converted"
        return f"{self.url} ({kind}, sha256 {self.sha256[:8]}…)"

    def manual_hint(self) -> str:
        return f"or put {self.archive_name} (sha256 {self.sha256}) in {downloads_dir()}/"

    def provide(self, files: Sequence[str], dest: Path, *, scratch: Path, progress: bool) -> None:
        archive_path = self._local_or_download(scratch, progress)
        with zipfile.ZipFile(archive_path) as archive:
            if self.members is not None:
                unknown = [name for name in files if name not in self.members]
                if unknown:
                    raise DataError(f"{self.url} has no member for {unknown}")
                extract_members(archive, {name: self.members[name] for name in files}, dest)
            else:
                assert self.converter is not None
                self.converter(archive, dest)
        missing = [name for name in files if not (dest / name).is_file()]
        if missing:
            raise DataError(f"{self.describe()} did not produce {missing}")

    def _local_or_download(self, scratch: Path, progress: bool) -> Path:
        local = downloads_dir() / self.archive_name
        if local.is_file():
            verify_sha256(local, self.sha256, f"hand-placed archive {self.archive_name}")
            return local
        target = scratch / f"url-{self.sha256[:16]}-{self.archive_name}"
        if not target.is_file():
            download_url(self.url, target, timeout=self.timeout, progress=progress)
        verify_sha256(target, self.sha256, f"archive {self.archive_name}")
        return target


class PyPIWheelSource(Source):
    """Files shipped inside a wheel on PyPI, downloaded with pip and verified by the wheel's sha256.

    Args:
        requirement: a pinned requirement, e.g. ``"recbole==1.2.1"``.
        wheel_sha256: sha256 of the wheel file (as listed on PyPI).
        members: ``{canonical name: path inside the wheel}``.
        timeout: seconds allowed for the pip run.

    Example:
        >>> src = PyPIWheelSource("pkg==1.0", "0" * 64, members={"a.txt": "pkg/a.txt"})
        >>> src.describe()
        'PyPI wheel pkg==1.0 (sha256 00000000…)'
    """

    def __init__(
        self, requirement: str, wheel_sha256: str, members: Mapping[str, str], *, timeout: float = 300.0
    ) -> None:
        if "==" not in requirement:
            raise DataError(f"requirement={requirement!r} must pin one version with '=='")
        self.requirement = requirement
        self.wheel_sha256 = wheel_sha256.lower()
        self.members = dict(members)
        self.timeout = timeout
        self.byte_exact = True

    def describe(self) -> str:
        return f"PyPI wheel {self.requirement} (sha256 {self.wheel_sha256[:8]}…)"

    def provide(self, files: Sequence[str], dest: Path, *, scratch: Path, progress: bool) -> None:
        unknown = [name for name in files if name not in self.members]
        if unknown:
            raise DataError(f"{self.describe()} has no member for {unknown}")
        wheel = self._wheel(scratch, progress)
        with zipfile.ZipFile(wheel) as archive:
            extract_members(archive, {name: self.members[name] for name in files}, dest)

    def _wheel(self, scratch: Path, progress: bool) -> Path:
        # Keyed by checksum so the parts of one fetch share a single download.
        folder = scratch / f"wheel-{self.wheel_sha256[:16]}"
        existing = sorted(folder.glob("*.whl")) if folder.is_dir() else []
        if existing:
            return existing[0]
        folder.mkdir(parents=True, exist_ok=True)
        wheel = self._pip_download(folder, progress)
        try:
            verify_sha256(wheel, self.wheel_sha256, f"wheel {wheel.name}")
        except DataError:
            wheel.unlink()
            raise
        return wheel

    def _pip_download(self, folder: Path, progress: bool) -> Path:
        """Runs pip for this source's wheel into ``folder``; subclasses add options (see ``PinnedWheelSource``)."""
        return pip_download(self.requirement, folder, timeout=self.timeout, progress=progress)

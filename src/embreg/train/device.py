"""Devices and precisions for training: ``train.device`` and ``train.precision``.

* :func:`resolve_device` turns a spec (``auto``, ``cpu``, ``cuda``, ``cuda:N``) into a ``torch.device``, with an
  error that says what to write instead when the hardware is missing.
* :func:`check_precision` refuses a precision the device cannot train in (``fp16`` needs CUDA for its grad scaler).
* :func:`autocast` is the forward pass's mixed-precision context (a no-op for ``fp32``).
* :func:`move_batch` moves one batch's tensors to the device, once per step.
* :func:`model_device` is where a model's parameters live (evaluators put their inputs there).

Example:
    >>> resolve_device("cpu")
    device(type='cpu')
    >>> move_batch({"user": torch.tensor([0, 1]), "index": torch.tensor(3)}, torch.device("cpu"))["user"].tolist()
    [0, 1]
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import Any, Literal

import torch
from torch import nn

from embreg.errors import ConfigError

__all__ = [
    "DEVICE_SPECS",
    "PRECISIONS",
    "Precision",
    "resolve_device",
    "check_precision",
    "autocast",
    "move_batch",
    "model_device",
]

Precision = Literal["fp32", "bf16", "fp16"]
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")
DEVICE_SPECS = "'auto', 'cpu', 'cuda' or 'cuda:N'"
_SPEC = re.compile(r"^(auto|cpu|cuda)(?::(\d+))?$")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """The device ``spec`` names: ``auto`` (or ``None``) is CUDA when present, else the CPU.

    ``cuda`` means the current CUDA device, ``cuda:N`` device ``N``.

    Raises:
        ConfigError: the spec is malformed, or names CUDA (or a CUDA device index) this machine does not have;
            the message says to set ``train.device=cpu`` (or ``auto``).

    Example:
        >>> resolve_device("cpu").type
        'cpu'
        >>> resolve_device("gpu")
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: train.device='gpu' is not a device; use 'auto', 'cpu', 'cuda' or 'cuda:N'
    """
    if spec is None:
        spec = "auto"
    if isinstance(spec, torch.device):
        spec = str(spec)
    match = _SPEC.match(spec.strip().lower()) if isinstance(spec, str) else None
    if match is None or (match.group(1) != "cuda" and match.group(2) is not None):
        raise ConfigError(f"train.device={spec!r} is not a device; use {DEVICE_SPECS}")
    kind, index = match.group(1), match.group(2)
    if kind == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if kind == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if available else torch.device("cpu")
    if not available:
        raise ConfigError(
            f"train.device={spec!r} asks for CUDA, but this machine has no CUDA device (or torch was built "
            f"without CUDA, torch {torch.__version__}); set train.device=cpu, or train.device=auto to use CUDA "
            "where there is one"
        )
    count = torch.cuda.device_count()
    number = torch.cuda.current_device() if index is None else int(index)
    if number >= count:
        raise ConfigError(
            f"train.device={spec!r}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}; "
            "set train.device=cuda:0, train.device=auto or train.device=cpu"
        )
    return torch.device("cuda", number)


def check_precision(precision: str, device: torch.device) -> None:
    """Refuses a precision ``device`` cannot train in.

    ``fp32`` and ``bf16`` run everywhere (bf16 on CUDA needs a GPU with bfloat16 support); ``fp16`` (float16
    autocast with loss scaling by ``torch.amp.GradScaler``) runs on CUDA only: on a CPU float16 kernels are slow and
    bf16, which has float32's range and needs no loss scaling, is the reduced precision to use.

    Raises:
        ConfigError: naming the precision, the device and what to use instead.

    Example:
        >>> check_precision("fp16", torch.device("cpu"))
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: train.precision='fp16' (float16 with a grad scaler) runs on CUDA only, but the device is cpu; use train.precision=bf16 (or fp32) on the CPU
    """
    if precision not in PRECISIONS:
        raise ConfigError(f"train.precision={precision!r} is not a precision; use one of {', '.join(PRECISIONS)}")
    if precision == "fp16" and device.type != "cuda":
        raise ConfigError(
            f"train.precision='fp16' (float16 with a grad scaler) runs on CUDA only, but the device is {device}; "
            "use train.precision=bf16 (or fp32) on the CPU"
        )
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError(
            f"train.precision='bf16': the CUDA device {device} has no bfloat16 support; use train.precision=fp16 "
            "or fp32"
        )


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager[Any]:
    """The mixed-precision context of a forward pass: ``torch.autocast`` in bf16/fp16, nothing in fp32.

    Example:
        >>> with autocast(torch.device("cpu"), "bf16"):
        ...     (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
        torch.bfloat16
    """
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=_DTYPES[precision])


def move_batch(batch: Any, device: torch.device) -> Any:
    """A batch with its tensors on ``device`` (dicts, lists and tuples are walked; other values kept).

    Each tensor is copied once; from pinned memory the copy is asynchronous (``non_blocking``). A tensor already on
    ``device`` is kept as it is, so on the CPU this costs nothing. 0-dim tensors (step counters and flags such as
    ``index`` and ``reset`` of language-model batches) stay where they are: models read them as Python numbers,
    which on a GPU would wait for the device, and a 0-dim CPU tensor combines with tensors on any device.

    Example:
        >>> batch = move_batch({"item": torch.arange(3), "meta": [torch.ones(2)]}, torch.device("cpu"))
        >>> batch["item"].device.type, batch["meta"][0].device.type
        ('cpu', 'cpu')
    """
    if isinstance(batch, torch.Tensor):
        if batch.device == device or batch.dim() == 0:
            return batch
        return batch.to(device, non_blocking=batch.is_pinned())
    if isinstance(batch, Mapping):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if type(batch) in (list, tuple):
        return type(batch)(move_batch(value, device) for value in batch)
    return batch


def model_device(model: nn.Module) -> torch.device:
    """The device of a model's first parameter (else its first buffer; the CPU for a model without either).

    Example:
        >>> model_device(nn.Linear(2, 2))
        device(type='cpu')
    """
    for parameter in model.parameters():
        return parameter.device
    for buffer in model.buffers():
        return buffer.device
    return torch.device("cpu")

"""Where a fused ``nn.LSTM`` can run under CPU bfloat16 autocast, and the float32 fallback where it cannot.

CPU autocast runs ``nn.LSTM`` through oneDNN in bfloat16, and oneDNN has no bfloat16 LSTM primitive on CPUs
without AVX-512 (an AMD EPYC with AVX2 fails with "could not create a primitive descriptor for the LSTM forward
propagation primitive"). There the LSTM runs in float32 with autocast off, while the rest of the model keeps
bfloat16 autocast; everywhere else nothing changes.

Example:
    >>> lstm = torch.nn.LSTM(4, 4, batch_first=True)
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     out, (h, c) = run_lstm(lstm, torch.zeros(2, 3, 4), None)
    >>> out.shape
    torch.Size([2, 3, 4])
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import torch
from torch import nn

__all__ = ["cpu_bf16_lstm_supported", "run_lstm"]


@functools.cache
def cpu_bf16_lstm_supported() -> bool:
    """Whether this CPU runs a fused ``nn.LSTM`` under bfloat16 autocast (probed once per process)."""
    lstm = nn.LSTM(4, 4, batch_first=True)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.zeros(1, 2, 4))
    except RuntimeError:
        warnings.warn(
            "this CPU has no bfloat16 LSTM kernel (oneDNN needs AVX-512); under train.precision=bf16 the LSTM "
            "layers run in float32 and the rest of the model in bfloat16",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    return True


def _cpu_bf16_autocast(x: torch.Tensor) -> bool:
    return (
        x.device.type == "cpu"
        and torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
    )


def run_lstm(module: nn.Module, x: torch.Tensor, state: Any) -> Any:
    """``module(x, state)``; in float32 with autocast off where CPU bfloat16 autocast cannot run it.

    Args:
        module: an ``nn.LSTM`` (or a wrapper of one, e.g. :class:`~embreg.nn.WeightDrop`).
        x: ``(B, T, I)`` inputs.
        state: ``(h, c)``, each ``(layers, B, H)``, or None.
    """
    if not _cpu_bf16_autocast(x) or cpu_bf16_lstm_supported():
        return module(x, state)
    if state is not None:
        state = tuple(s.float() for s in state)
    with torch.autocast("cpu", enabled=False):
        return module(x.float(), state)

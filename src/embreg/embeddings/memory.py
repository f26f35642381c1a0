"""Exact memory of an embedding layer: bytes of parameters, buffers and optimizer state.

mixed-dimension-embeddings.txt, Sec. V measures memory as the number of 32-bit parameters; these helpers give
bytes, so index maps (buffers) and optimizer state (Adam keeps two tensors per parameter) are counted too.

Example:
    >>> layer = torch.nn.Embedding(1000, 16)
    >>> parameter_bytes(layer)
    64000
    >>> opt = torch.optim.Adam(layer.parameters())
    >>> layer(torch.tensor([1])).sum().backward(); opt.step()
    >>> optimizer_state_bytes(opt)
    128004
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["parameter_bytes", "buffer_bytes", "optimizer_state_bytes", "memory_report"]


def _tensor_bytes(tensor: torch.Tensor) -> int:
    if tensor.is_sparse:
        return _tensor_bytes(tensor._indices()) + _tensor_bytes(tensor._values())
    return tensor.numel() * tensor.element_size()


def parameter_bytes(module: nn.Module) -> int:
    """Bytes of every parameter of ``module``."""
    return sum(_tensor_bytes(p) for p in module.parameters())


def buffer_bytes(module: nn.Module) -> int:
    """Bytes of every buffer of ``module`` (e.g. a mixed-dimension layer's index map)."""
    return sum(_tensor_bytes(b) for b in module.buffers())


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in the optimizer's state (after a step; Adam: ``exp_avg``, ``exp_avg_sq``, ``step``)."""
    return sum(
        _tensor_bytes(v) for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)
    )


def memory_report(module: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict[str, int]:
    """``{"parameters", "parameter_bytes", "buffer_bytes", "optimizer_bytes", "total_bytes"}`` of ``module``.

    Example:
        >>> memory_report(torch.nn.Embedding(10, 4))["total_bytes"]
        160
    """
    params = parameter_bytes(module)
    buffers = buffer_bytes(module)
    state = optimizer_state_bytes(optimizer) if optimizer is not None else 0
    return {
        "parameters": sum(p.numel() for p in module.parameters()),
        "parameter_bytes": params,
        "buffer_bytes": buffers,
        "optimizer_bytes": state,
        "total_bytes": params + buffers + state,
    }

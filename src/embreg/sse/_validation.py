"""Input checks shared by the SSE functions and modules.

Every check raises :class:`embreg.errors.EmbregError` with a message that names
the bad value and the valid range, so a wrong recipe value is easy to spot.
"""

from __future__ import annotations

import math
import numbers

import torch

from embreg.errors import EmbregError

# Integer dtypes an id tensor may have; bool is excluded on purpose because a
# mask passed by mistake would otherwise be read as ids 0 and 1.
ID_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def check_probability(value: float, name: str = "p") -> float:
    """Return ``value`` as a float after checking it lies in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise EmbregError(f"{name}={value!r} must be a real number in [0, 1]")
    value = float(value)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise EmbregError(f"{name}={value} is outside [0, 1]")
    return value


def check_rho(rho: float) -> float:
    """Return ``rho`` as a float after checking it is finite and >= 1 (paper eq. 3)."""
    if isinstance(rho, bool) or not isinstance(rho, numbers.Real):
        raise EmbregError(f"rho={rho!r} must be a real number >= 1")
    rho = float(rho)
    if math.isnan(rho) or math.isinf(rho) or rho < 1.0:
        raise EmbregError(f"rho={rho} must be >= 1 (and finite)")
    return rho


def check_num_embeddings(value: int, name: str = "num_embeddings") -> int:
    """Return ``value`` after checking it is an int >= 2 (a swap needs another id)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise EmbregError(f"{name}={value!r} must be an int >= 2")
    if value < 2:
        raise EmbregError(f"{name}={value} must be >= 2: a swap needs at least one other id")
    return int(value)


def check_ids_dtype(ids: torch.Tensor) -> None:
    """Raise unless ``ids`` is a tensor of an integer dtype."""
    if not isinstance(ids, torch.Tensor):
        raise EmbregError(f"ids must be a torch.Tensor of integer ids, got {type(ids).__name__}")
    if ids.dtype not in ID_DTYPES:
        raise EmbregError(f"ids have dtype {ids.dtype}; expected an integer dtype such as torch.long")


def check_ids_range(ids: torch.Tensor, num_embeddings: int, allowed: int | None = None) -> None:
    """Raise unless every id lies in [0, num_embeddings) or equals ``allowed``.

    Args:
        ids: integer tensor of any shape.
        num_embeddings: size N of the index set.
        allowed: one extra value accepted anywhere (a label ``ignore_index``), or None.
    """
    if ids.numel() == 0:
        return
    lo, hi = torch.stack(torch.aminmax(ids)).tolist()  # one read-back (one host sync on a GPU)
    if lo >= 0 and hi < num_embeddings:
        return
    bad = (ids < 0) | (ids >= num_embeddings)
    if allowed is not None:
        bad &= ids != allowed
    if not bool(bad.any()):
        return
    offending = ids[bad]
    extra = f" (or ignore_index={allowed})" if allowed is not None else ""
    raise EmbregError(
        f"ids out of range: {int(bad.sum())} value(s) from {int(offending.min())} to "
        f"{int(offending.max())}; valid range is [0, {num_embeddings}){extra}"
    )

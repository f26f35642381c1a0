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
# The largest id each dtype holds (a transform's output must hold N - 1).
_ID_DTYPE_MAX = {dtype: torch.iinfo(dtype).max for dtype in ID_DTYPES}


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


def check_ids_dtype(ids: torch.Tensor, num_embeddings: int | None = None) -> None:
    """Raise unless ``ids`` is a tensor of an integer dtype that can hold every id up to ``num_embeddings - 1``.

    A transform writes ids drawn from all of ``[0, N)`` into a tensor of the input's dtype, so that dtype must
    hold ``N - 1``: ``SSE(40000)`` on ``int16`` ids would otherwise wrap replacements to negative ids. Every
    backend (the C++ kernel, the tensor ops, the CUDA sampler) is exact wherever this check passes.

    Args:
        ids: the id tensor.
        num_embeddings: N, the size of the index set; None checks the dtype only.

    Raises:
        EmbregError: ``ids`` is not a tensor, has a dtype outside :data:`ID_DTYPES` (floats, bool, ...), or a
            dtype whose largest value is below ``N - 1``.

    Example:
        >>> check_ids_dtype(torch.zeros(3, dtype=torch.int16), 40000)
        Traceback (most recent call last):
        ...
        embreg.errors.EmbregError: ids of dtype torch.int16 cannot hold ids up to 39999; pass int32 or int64 ids
    """
    if not isinstance(ids, torch.Tensor):
        raise EmbregError(f"ids must be a torch.Tensor of integer ids, got {type(ids).__name__}")
    if ids.dtype not in ID_DTYPES:
        raise EmbregError(
            f"ids have dtype {ids.dtype}; expected one of {', '.join(str(d) for d in ID_DTYPES)} (torch.long is usual)"
        )
    if num_embeddings is not None and num_embeddings - 1 > _ID_DTYPE_MAX[ids.dtype]:
        raise EmbregError(
            f"ids of dtype {ids.dtype} cannot hold ids up to {num_embeddings - 1}; pass "
            f"{' or '.join(_wide_enough(num_embeddings))} ids"
        )


def holds_value(dtype: torch.dtype, value: int) -> bool:
    """Whether an integer ``dtype`` holds ``value``; torch wraps a value it does not hold when comparing
    (``uint8`` ids ``== -100`` matches id 156), so a label's ``ignore_index`` is compared only where this holds."""
    if dtype not in ID_DTYPES:
        return True  # not an id dtype: compared as torch does, and refused by the dtype check
    info = torch.iinfo(dtype)
    return info.min <= value <= info.max


def _wide_enough(num_embeddings: int) -> list[str]:
    """The names of the id dtypes (narrowest first, int32 and int64 always among them if they fit) holding N - 1."""
    fits = [d for d in (torch.int32, torch.int64) if num_embeddings - 1 <= _ID_DTYPE_MAX[d]]
    return [str(d).removeprefix("torch.") for d in fits] or ["int64"]


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
    if allowed is not None and holds_value(ids.dtype, allowed):  # else no id equals it (and comparing would wrap)
        bad &= ids != allowed
    if not bool(bad.any()):
        return
    offending = ids[bad]
    extra = f" (or ignore_index={allowed})" if allowed is not None else ""
    raise EmbregError(
        f"ids out of range: {int(bad.sum())} value(s) from {int(offending.min())} to "
        f"{int(offending.max())}; valid range is [0, {num_embeddings}){extra}"
    )

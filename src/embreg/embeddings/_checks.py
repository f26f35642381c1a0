"""Input checks shared by the sizing, blocking and layer code.

Every check raises :class:`embreg.errors.EmbregError` naming the bad value and the valid range.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch

from embreg.errors import EmbregError

ID_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def check_int(value: object, name: str, low: int, high: int | None = None) -> int:
    """``value`` as an int after checking ``low <= value (<= high)``; bools are rejected."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise EmbregError(f"{name}={value!r} must be an integer {bound}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise EmbregError(f"{name}={value} is outside the valid range {bound}")
    return value


def check_alpha(alpha: object) -> float:
    """The temperature ``alpha`` as a float after checking it lies in [0, 1] (paper Alg. 1)."""
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise EmbregError(f"alpha={alpha!r} must be a real number in [0, 1]")
    alpha = float(alpha)
    if math.isnan(alpha) or not 0.0 <= alpha <= 1.0:
        raise EmbregError(f"alpha={alpha} is outside the valid range [0, 1]")
    return alpha


def check_budget(budget: object) -> float:
    """A parameter budget as a float after checking it is a finite number > 0."""
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real):
        raise EmbregError(f"budget={budget!r} must be a number of parameters > 0")
    budget = float(budget)
    if math.isnan(budget) or math.isinf(budget) or budget <= 0:
        raise EmbregError(f"budget={budget} must be a finite number of parameters > 0")
    return budget


def as_frequencies(values: object, name: str = "frequencies") -> torch.Tensor:
    """A 1-d float64 tensor of non-negative, finite values with a positive sum."""
    if isinstance(values, torch.Tensor):
        tensor = values.detach().to("cpu", torch.float64)
    else:  # lists and numpy arrays straight to float64, so no precision is lost on the way
        tensor = torch.as_tensor(values, dtype=torch.float64)
    if tensor.ndim != 1 or tensor.numel() == 0:
        raise EmbregError(f"{name} must be a non-empty 1-d sequence, got shape {tuple(tensor.shape)}")
    if not torch.isfinite(tensor).all():
        raise EmbregError(f"{name} holds non-finite values; every entry must be a finite count >= 0")
    if (tensor < 0).any():
        bad = tensor[tensor < 0][0].item()
        raise EmbregError(f"{name} holds the negative value {bad}; every entry must be >= 0")
    if tensor.sum() <= 0:
        raise EmbregError(f"{name} sum to 0; at least one row must have been queried")
    return tensor


def check_sizes(values: Sequence[int], name: str, low: int = 1) -> tuple[int, ...]:
    """A non-empty tuple of ints, each >= ``low``."""
    values = list(values)
    if not values:
        raise EmbregError(f"{name} is empty; give at least one entry")
    return tuple(check_int(v, f"{name}[{i}]", low) for i, v in enumerate(values))


def check_block_layout(
    block_rows: Sequence[int], block_dims: Sequence[int], base_dim: int
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """``(rows, dims, base_dim)`` of a mixed-dimension layer after checking that every block has rows, a dimension
    in ``[1, base_dim]``, and that there are as many dimensions as blocks."""
    rows = check_sizes(block_rows, "block_rows")
    dims = check_sizes(block_dims, "block_dims")
    base_dim = check_int(base_dim, "base_dim", 1)
    if len(rows) != len(dims):
        raise EmbregError(f"block_rows has {len(rows)} entries but block_dims has {len(dims)}; they must match")
    for i, d in enumerate(dims):
        if d > base_dim:
            raise EmbregError(f"block_dims[{i}]={d} is outside the valid range [1, base_dim={base_dim}]")
    return rows, dims, base_dim


def holds_value(dtype: torch.dtype, value: int) -> bool:
    """Whether an integer ``dtype`` holds ``value``. Torch wraps a value the dtype does not hold when comparing
    (``uint8`` ids ``!= 299`` compares with 43), so an id such as ``padding_idx`` is compared only where this holds:
    otherwise no id can equal it."""
    if dtype not in ID_DTYPES:
        return True  # not an id dtype: compared as torch does, and refused by the dtype check
    info = torch.iinfo(dtype)
    return info.min <= value <= info.max


def check_ids(ids: torch.Tensor, num_embeddings: int, name: str = "ids") -> None:
    """Raise unless ``ids`` is an integer tensor with every entry in ``[0, num_embeddings)``."""
    if not isinstance(ids, torch.Tensor):
        raise EmbregError(f"{name} must be a torch.Tensor of integer ids, got {type(ids).__name__}")
    if ids.dtype not in ID_DTYPES:
        raise EmbregError(f"{name} must have an integer dtype, got {ids.dtype}")
    if ids.numel() == 0:
        return
    low, high = torch.stack(torch.aminmax(ids)).tolist()  # one pass, one read-back (one host sync on a GPU)
    if low < 0 or high >= num_embeddings:
        bad = low if low < 0 else high
        raise EmbregError(f"{name} holds the id {bad}; valid ids are in [0, {num_embeddings - 1}]")

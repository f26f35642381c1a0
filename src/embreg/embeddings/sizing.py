"""Popularity-based dimension sizing: the power-law rule of mixed-dimension-embeddings.txt, Alg. 1.

Block ``i`` holds ``n_i`` rows whose average query probability is ``p_i``. The rule gives it the dimension
``d_i = lambda * p_i ** alpha``; the temperature ``alpha`` in [0, 1] sets how strongly popularity matters
(``alpha = 0``: uniform dimensions; ``alpha = 1``: dimensions proportional to popularity). ``lambda`` is fixed
in one of two ways:

* from a base dimension ``d_bar`` (Alg. 1): ``lambda = d_bar * max(p) ** -alpha``, so the most popular block
  gets exactly ``d_bar``;
* from a parameter budget ``B`` (Sec. III, "parameter budget (total area)"): ``sum_i n_i d_i = B``, i.e.
  ``lambda = B / sum_i n_i p_i ** alpha`` when no bound is active. With a minimum dimension (and optionally the
  base dimension as a maximum) the bounds are honoured and ``lambda`` is found by bisection, so the budget is
  still met exactly before rounding.

The budget counts the embedding rows only (``sum_i n_i d_i``), as in the paper; the projections ``d_i x d_bar``
come on top and :func:`md_parameter_count` gives the exact total.

Example:
    >>> power_law_dims([0.5, 0.1, 0.01], alpha=0.5, base_dim=64)
    [64, 29, 9]
    >>> power_law_dims([0.5, 0.1, 0.01], alpha=0.0, base_dim=64)
    [64, 64, 64]
    >>> power_law_dims([1 / 10, 1 / 100], alpha=0.0, budget=1100, rows=[10, 100])
    [10, 10]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from embreg.embeddings._checks import as_frequencies, check_alpha, check_budget, check_int, check_sizes
from embreg.errors import EmbregError

__all__ = ["power_law_sizes", "power_law_dims", "round_dims", "md_parameter_count"]

_BISECTION_STEPS = 200


def _solve_scale(weights: torch.Tensor, rows: torch.Tensor, budget: float, low: float, high: float) -> float:
    """The ``lambda`` with ``sum_i rows_i * clamp(lambda * weights_i, low, high) == budget`` (bisection)."""
    if weights.max() <= 0:
        raise EmbregError("every block has popularity 0 at alpha > 0; at least one block must be queried")

    def total(scale: float) -> float:
        return float((rows * (scale * weights).clamp(low, high)).sum())

    lo, hi = 0.0, budget / float((rows * weights).sum())
    if math.isfinite(high):
        hi = max(hi, high / float(weights[weights > 0].min()))
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if total(mid) < budget:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def power_law_sizes(
    popularity: Sequence[float] | torch.Tensor,
    alpha: float,
    *,
    base_dim: int | None = None,
    budget: float | None = None,
    rows: Sequence[int] | None = None,
    min_dim: int = 1,
) -> torch.Tensor:
    """Continuous (unrounded) block dimensions of the power-law rule (mixed-dimension-embeddings.txt, Alg. 1).

    Args:
        popularity: ``p``, shape (k,): the average query probability of a row in each block (any positive
            scale; only ratios matter). Zeros are allowed (never-queried blocks get ``min_dim`` when
            ``alpha > 0``).
        alpha: temperature in [0, 1].
        base_dim: without ``budget``: the dimension of the most popular block (Alg. 1). With ``budget``: an
            upper bound on every dimension (``None``: unbounded).
        budget: total embedding-row parameters ``sum_i rows_i * d_i`` to spend (needs ``rows``).
        rows: ``n_i``, shape (k,), rows per block (needed with ``budget``).
        min_dim: lower bound on every dimension.

    Returns:
        (k,) float64 dimensions within ``[min_dim, base_dim]``.

    Example:
        >>> power_law_sizes([4.0, 1.0], alpha=0.5, base_dim=32).tolist()
        [32.0, 16.0]
    """
    p = as_frequencies(popularity, "popularity")
    alpha = check_alpha(alpha)
    min_dim = check_int(min_dim, "min_dim", 1)
    if base_dim is not None:
        base_dim = check_int(base_dim, "base_dim", 1)
        if min_dim > base_dim:
            raise EmbregError(f"min_dim={min_dim} is outside the valid range [1, base_dim={base_dim}]")
    weights = p.pow(alpha)
    if budget is None:
        if base_dim is None:
            raise EmbregError("give base_dim (Alg. 1) or budget (with rows) to size the blocks")
        if rows is not None and len(rows) != p.numel():
            raise EmbregError(f"rows has {len(rows)} entries but popularity has {p.numel()}; they must match")
        scale = base_dim / float(p.max()) ** alpha
        return (scale * weights).clamp(min_dim, base_dim)
    budget = check_budget(budget)
    if rows is None:
        raise EmbregError("sizing from a budget needs rows (the number of rows n_i of each block)")
    n = torch.tensor(check_sizes(rows, "rows"), dtype=torch.float64)
    if n.numel() != p.numel():
        raise EmbregError(f"rows has {n.numel()} entries but popularity has {p.numel()}; they must match")
    high = float(base_dim) if base_dim is not None else math.inf
    least, most = min_dim * float(n.sum()), high * float(n.sum())
    if not least <= budget <= most:
        raise EmbregError(
            f"budget={budget:.0f} is outside the valid range [{least:.0f}, {most:.0f}] for {int(n.sum())} rows "
            f"with min_dim={min_dim}" + (f" and base_dim={base_dim}" if base_dim is not None else "")
        )
    scale = _solve_scale(weights, n, budget, float(min_dim), high)
    return (scale * weights).clamp(float(min_dim), high)


def round_dims(
    sizes: torch.Tensor, *, round_pow2: bool = False, min_dim: int = 1, max_dim: int | None = None
) -> list[int]:
    """Rounds continuous dimensions to integers (nearest) or to powers of two (nearest in log2), then bounds them.

    Args:
        sizes: (k,) continuous dimensions.
        round_pow2: round to the nearest power of two (as in the paper's Fig. 6) instead of the nearest integer.
        min_dim: lower bound after rounding.
        max_dim: upper bound after rounding (``None``: none).

    Example:
        >>> round_dims(torch.tensor([5.4, 2.6, 0.2]))
        [5, 3, 1]
        >>> round_dims(torch.tensor([45.0, 11.0, 3.0]), round_pow2=True)
        [32, 8, 4]
    """
    sizes = sizes.to(torch.float64)
    if round_pow2:
        rounded = torch.pow(2.0, torch.floor(torch.log2(sizes.clamp_min(1e-12)) + 0.5))
    else:
        rounded = torch.floor(sizes + 0.5)
    rounded = rounded.clamp_min(min_dim)
    if max_dim is not None:
        rounded = rounded.clamp_max(max_dim)
    return [int(v) for v in rounded.tolist()]


def power_law_dims(
    popularity: Sequence[float] | torch.Tensor,
    alpha: float,
    *,
    base_dim: int | None = None,
    budget: float | None = None,
    rows: Sequence[int] | None = None,
    min_dim: int = 1,
    round_pow2: bool = False,
) -> list[int]:
    """Integer block dimensions of the power-law rule (mixed-dimension-embeddings.txt, Alg. 1), rounded.

    :func:`power_law_sizes` followed by :func:`round_dims`; with ``budget`` the rounded total is within
    ``sum_i rows_i / 2`` of the budget for nearest-integer rounding.

    Args:
        popularity: (k,) average query probability per row of each block.
        alpha: temperature in [0, 1]; 0 gives uniform dimensions.
        base_dim: dimension of the most popular block (without ``budget``) or upper bound (with it).
        budget: total embedding-row parameters ``sum_i rows_i * d_i``.
        rows: (k,) rows per block (needed with ``budget``).
        min_dim: smallest dimension a block may get.
        round_pow2: round to powers of two.

    Returns:
        k integer dimensions.

    Example:
        >>> power_law_dims([0.5, 0.1, 0.01], alpha=0.5, base_dim=64, round_pow2=True)
        [64, 32, 8]
    """
    sizes = power_law_sizes(popularity, alpha, base_dim=base_dim, budget=budget, rows=rows, min_dim=min_dim)
    return round_dims(sizes, round_pow2=round_pow2, min_dim=min_dim, max_dim=base_dim)


def md_parameter_count(rows: Sequence[int], dims: Sequence[int], base_dim: int) -> int:
    """Exact parameter count of a mixed-dimension layer: ``sum_i n_i d_i + sum_{d_i != d_bar} d_i d_bar``.

    Blocks at the base dimension need no projection (identity), so they add no projection parameters.

    Example:
        >>> md_parameter_count([10, 100], [8, 2], base_dim=8)
        296
    """
    rows, dims = check_sizes(rows, "rows"), check_sizes(dims, "dims")
    if len(rows) != len(dims):
        raise EmbregError(f"rows has {len(rows)} entries but dims has {len(dims)}; they must match")
    return sum(n * d for n, d in zip(rows, dims)) + sum(d * base_dim for d in dims if d != base_dim)

"""Argument checks shared by the dropout blocks; every message names the bad value and the valid range."""

from __future__ import annotations

from embreg.errors import EmbregError


def check_probability(q: float, name: str = "q") -> float:
    """Returns ``q`` as a float when ``0 <= q < 1``; otherwise raises :class:`EmbregError`.

    Example:
        >>> check_probability(0.4)
        0.4
    """
    if isinstance(q, bool) or not isinstance(q, (int, float)):
        raise EmbregError(f"{name}={q!r} must be a number in [0, 1)")
    if not 0.0 <= float(q) < 1.0:
        raise EmbregError(f"{name}={q} is outside [0, 1): a dropout probability of 1 would drop everything")
    return float(q)

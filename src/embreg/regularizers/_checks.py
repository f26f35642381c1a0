"""Argument checks of the fine-tuning regularisers; every message names the bad value and the valid range."""

from __future__ import annotations

import math

from embreg.errors import ConfigError


def check_number(
    value: float, name: str, *, low: float = 0.0, high: float = math.inf, low_open: bool = False, high_open: bool = True
) -> float:
    """Returns ``value`` as a float when it lies in the interval; otherwise raises :class:`ConfigError`.

    Example:
        >>> check_number(0.5, "sigma")
        0.5
        >>> check_number(-1, "sigma")
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: sigma=-1 is outside [0, inf)
    """
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ConfigError(f"{name}={value!r} must be a number in {interval}")
    below = value <= low if low_open else value < low
    above = value >= high if high_open else value > high
    if below or above:
        raise ConfigError(f"{name}={value} is outside {interval}")
    return float(value)


def check_positive_int(value: int, name: str) -> int:
    """Returns ``value`` when it is an int >= 1; otherwise raises :class:`ConfigError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}={value!r} must be an int >= 1")
    return value

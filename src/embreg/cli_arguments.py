"""argparse types every ``embreg`` command shares (the top-level CLI, serving, studies, a task's command).

A module of its own at the ground floor, so that the sub-command modules take these types without importing
:mod:`embreg.cli`, which imports them.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> _ = parser.add_argument("--seeds", type=positive_int)
    >>> parser.parse_args(["--seeds", "3"]).seeds
    3
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["int_at_least", "positive_int"]


def int_at_least(minimum: int) -> Callable[[str], int]:
    """argparse type: an integer >= ``minimum`` (``--seeds 0`` is an error, not one seed).

    Example:
        >>> int_at_least(0)("3"), int_at_least(1)("1")
        (3, 1)
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be >= {minimum}")
        return value

    return parse


positive_int = int_at_least(1)
"""argparse type: an integer >= 1."""

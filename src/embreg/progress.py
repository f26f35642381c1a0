"""Progress on stderr: tqdm bars on a terminal, plain lines everywhere else (a log file, a pipe, CI).

A tqdm bar redraws itself with carriage returns and escape codes, which fill a log with every intermediate state.
:func:`progress` gives a tqdm bar when its stream is a terminal (or a Jupyter kernel, where tqdm draws a widget), and
otherwise a :class:`LineProgress`: one line per ``every`` share of the total (``every=0``: one line per update,
e.g. per epoch), with no control characters, so ``embreg run ... 2> log.txt`` reads as text. Both take the same
calls: ``update``, ``set_postfix``, ``write``, ``close`` and ``with``.

Example:
    >>> import io
    >>> stream = io.StringIO()
    >>> with progress(total=4, desc="epoch 0", unit="step", every=0.5, file=stream) as bar:
    ...     for _ in range(4):
    ...         bar.update(1)
    >>> print(stream.getvalue().replace("\\n", "|"))  # doctest: +ELLIPSIS
    epoch 0: 2/4 step (50%, ...s)|epoch 0: 4/4 step (100%, ...s)|
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import IO, Any

__all__ = ["progress", "LineProgress", "is_terminal"]


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` draws a redrawn bar well: a terminal, or a Jupyter kernel's output stream."""
    if type(stream).__module__.startswith("ipykernel"):
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed stream
        return False


class LineProgress:
    """Progress written as whole lines: ``desc: n/total unit (pct%, seconds) key=value ...``.

    Args:
        total: the count at completion (``None``: unknown; a line per ``update`` when ``every`` is 0, else one
            at ``close``).
        desc: what is counted (``"epochs"``, ``"epoch 3"``).
        unit: the unit after the counts.
        every: write a line each time another ``every`` share of ``total`` is done (``0``: at every update).
        initial: the count to start from (a resumed run's epochs).
        file: the stream (default stderr).
        disable: write nothing.
    """

    def __init__(
        self,
        total: int | None = None,
        desc: str = "",
        unit: str = "it",
        *,
        every: float = 0.0,
        initial: int = 0,
        file: IO[str] | None = None,
        disable: bool = False,
    ) -> None:
        self.total, self.desc, self.unit, self.every = total, desc, unit, every
        self.n = initial
        self.file = file if file is not None else sys.stderr
        self.disable = disable
        self.postfix = ""
        self._started = time.perf_counter()
        self._written_at = self._mark(initial)

    def _mark(self, n: int) -> int:
        """The number of ``every`` shares of ``total`` that ``n`` completes (``n`` itself when ``every`` is 0)."""
        if self.every <= 0 or not self.total:
            return n
        return int(n / self.total / self.every + 1e-9)

    def _line(self) -> str:
        counts = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        share = f"{100 * self.n / self.total:.0f}%, " if self.total else ""
        seconds = time.perf_counter() - self._started
        return f"{self.desc}: {counts} {self.unit} ({share}{seconds:.1f}s){self.postfix}"

    def update(self, n: int = 1) -> None:
        """Counts ``n`` more; writes a line when another ``every`` share is done."""
        self.n += n
        if self.disable or (self.every > 0 and not self.total):
            return
        mark = self._mark(self.n)
        if mark > self._written_at:
            self._written_at = mark
            self.write(self._line())

    def set_postfix(self, values: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """``key=value`` pairs appended to the following lines."""
        pairs = {**(values or {}), **kwargs}
        self.postfix = "".join(f" {key}={value}" for key, value in pairs.items())

    def write(self, text: str, file: IO[str] | None = None) -> None:
        """Writes ``text`` as its own line, shown or not (as ``tqdm.write``: a message, not progress)."""
        print(text, file=file if file is not None else self.file, flush=True)

    def close(self) -> None:
        """Ends the progress (a total-less count gets its one line here)."""
        if not self.disable and self.every > 0 and not self.total and self.n:
            self.write(self._line())
        self.disable = True

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(
    total: int | None = None,
    desc: str = "",
    *,
    unit: str = "it",
    enabled: bool = True,
    every: float = 0.0,
    initial: int = 0,
    leave: bool = True,
    file: IO[str] | None = None,
    **tqdm_options: Any,
) -> Any:
    """A progress bar on ``file`` (default stderr): tqdm's on a terminal, a :class:`LineProgress` elsewhere.

    Args:
        total, desc, unit, initial: what is counted.
        enabled: show anything at all.
        every: off a terminal, a line each ``every`` share of ``total`` (``0``: one per update).
        leave: on a terminal, keep the bar once closed.
        file: the stream.
        tqdm_options: further tqdm arguments (``unit_scale``, ``dynamic_ncols``), used on a terminal only.
    """
    stream = file if file is not None else sys.stderr
    if enabled and is_terminal(stream):
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit=unit, initial=initial, leave=leave, file=stream, **tqdm_options)
    return LineProgress(total, desc, unit, every=every, initial=initial, file=stream, disable=not enabled)

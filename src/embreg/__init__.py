"""embreg: regularisation and compression for embedding-heavy models.

The public entry points most users need::

    from embreg.sse import SSE, SSEGraph, SSEEmbedding, NeighbourGraph
    from embreg.models import BiasedMF, BPR
    run = embreg.load("runs/mf")   # a trained run: predict, recommend, score (embreg.serving)

See ``docs/architecture.md`` for the map of the package.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from embreg.serving.trained_run import TrainedRun

__version__ = "0.1.0"


def load(
    run_dir: str | Path,
    checkpoint: str = "best",
    device: str = "cpu",
    *,
    seed: int | None = None,
    allow_unfinished: bool = False,
    allow_failed: bool = False,
) -> TrainedRun:
    """A finished run's model, recipe and id vocabularies (:func:`embreg.serving.load`; ``seed``: one seed of a
    multi-seed run; ``allow_unfinished`` / ``allow_failed``: serve a run that did not finish).

    Example:
        >>> import embreg
        >>> run = embreg.load("runs/mf")  # doctest: +SKIP
        >>> run = embreg.load("runs/mf-5-seeds", seed=2)  # doctest: +SKIP
    """
    from embreg.serving import load as _load

    return _load(
        run_dir,
        checkpoint=checkpoint,
        device=device,
        seed=seed,
        allow_unfinished=allow_unfinished,
        allow_failed=allow_failed,
    )

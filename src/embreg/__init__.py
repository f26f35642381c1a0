"""embreg: regularisation and compression for embedding-heavy models.

The public entry points most users need::

    from embreg.sse import SSE, SSEGraph, SSEEmbedding, NeighbourGraph
    from embreg.models import BiasedMF, BPR

See ``docs/architecture.md`` for the map of the package.
"""

__version__ = "0.1.0"


def load(run_dir, checkpoint: str = "best", device: str = "cpu"):  # type: ignore[no-untyped-def]
    """A finished run's model, recipe and id vocabularies (:func:`embreg.serving.load`)."""
    from embreg.serving import load as _load

    return _load(run_dir, checkpoint=checkpoint, device=device)

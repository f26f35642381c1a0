"""embreg: regularisation and compression for embedding-heavy models.

The public entry points most users need::

    from embreg.sse import SSE, SSEGraph, SSEEmbedding, NeighbourGraph
    from embreg.models import BiasedMF, BPR

See ``docs/architecture.md`` for the map of the package.
"""

__version__ = "0.1.0"

"""Initialisation of embedding tables, uniform or mixed-dimension, by the scheme a recipe names.

mixed-dimension-embeddings.txt, Appendix H-I: "For initialization we use the uniform Xavier initialization
(for consistency with CTR prediction)" and "We initialized all neural network parameters, including embedding
matrices, according to the same scheme". For a table ``(n, d)`` uniform Xavier draws every entry from
``U(-b, b)`` with ``b = sqrt(6 / (n + d))`` (torch's ``xavier_uniform_``: fan-in ``d``, fan-out ``n``); in a
mixed-dimension layer every block ``E_i (n_i, d_i)`` and every projection ``P_i (d_i, D)`` is one such matrix.

Example:
    >>> import torch
    >>> from torch import nn
    >>> table = init_embedding_(nn.Embedding(94, 6), "xavier_uniform")
    >>> bool(table.weight.abs().max() <= 0.25)  # b = sqrt(6 / 100)
    True
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from embreg.embeddings.bag import MixedDimensionEmbeddingBag
from embreg.embeddings.mixed_dimension import MixedDimensionEmbedding

__all__ = ["EMBEDDING_INITS", "init_embedding_"]

EmbeddingInit = Literal["normal", "xavier_uniform"]
EMBEDDING_INITS: tuple[str, ...] = ("normal", "xavier_uniform")


def _matrices(table: nn.Module) -> list[torch.Tensor]:
    """The weight matrices of ``table`` (views of a mixed-dimension layer's flat parameters)."""
    if isinstance(table, MixedDimensionEmbeddingBag):
        table = table.embedding
    if isinstance(table, MixedDimensionEmbedding):
        return [m for block in table.blocks for m in (block.weight, block.projection) if m is not None]
    if isinstance(table, (nn.Embedding, nn.EmbeddingBag)):
        return [table.weight]
    raise TypeError(f"cannot initialise a {type(table).__name__}: expected nn.Embedding, nn.EmbeddingBag, "
                    "MixedDimensionEmbedding or MixedDimensionEmbeddingBag")


@torch.no_grad()
def init_embedding_(table: nn.Module, scheme: EmbeddingInit, *, std: float = 0.1) -> nn.Module:
    """Re-initialises ``table`` in place and returns it.

    Args:
        table: ``nn.Embedding``, ``nn.EmbeddingBag``, :class:`MixedDimensionEmbedding` or
            :class:`MixedDimensionEmbeddingBag`.
        scheme: ``"normal"``: rows ``N(0, std^2)``, and in a mixed-dimension layer projections
            ``N(0, 1 / d_i)`` (the layer's own :meth:`~MixedDimensionEmbedding.reset_parameters`);
            ``"xavier_uniform"``: every matrix (``(n, d)`` table; ``E_i`` ``(n_i, d_i)`` and ``P_i`` ``(d_i, D)``)
            from ``U(-b, b)``, ``b = sqrt(6 / (rows + columns))`` (paper Appendix H-I).
        std: the row standard deviation of ``"normal"``.

    A plain ``nn.Embedding``'s ``padding_idx`` row is zeroed afterwards, as ``nn.Embedding`` starts it.

    Raises:
        ValueError: an unknown ``scheme`` (naming the valid ones) or ``std <= 0``.
        TypeError: ``table`` is not one of the four embedding modules.
    """
    if scheme not in EMBEDDING_INITS:
        raise ValueError(f"unknown embedding init {scheme!r}; choose one of {EMBEDDING_INITS}")
    if std <= 0:
        raise ValueError(f"init std={std} must be > 0")
    matrices = _matrices(table)
    if scheme == "xavier_uniform":
        for matrix in matrices:
            nn.init.xavier_uniform_(matrix)
    elif isinstance(table, (MixedDimensionEmbedding, MixedDimensionEmbeddingBag)):
        layer = table.embedding if isinstance(table, MixedDimensionEmbeddingBag) else table
        layer.init_std = float(std)
        layer.reset_parameters()
    else:
        nn.init.normal_(table.weight, std=std)
    if isinstance(table, nn.Embedding) and table.padding_idx is not None:
        table.weight[table.padding_idx].zero_()
    return table

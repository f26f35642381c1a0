"""Initialisation of embedding tables, uniform or mixed-dimension, by the scheme a recipe names.

mixed-dimension-embeddings.txt, Appendix H-I: "For initialization we use the uniform Xavier initialization
(for consistency with CTR prediction)" and "We initialized all neural network parameters, including embedding
matrices, according to the same scheme". For a table ``(n, d)`` uniform Xavier draws every entry from
``U(-b, b)`` with ``b = sqrt(6 / (n + d))`` (torch's ``xavier_uniform_``: fan-in ``d``, fan-out ``n``). A
mixed-dimension layer is "a single n x d_bar block matrix for which the i-th block is factored at dimension d_i"
(Sec. III), so its rows are drawn as rows of that ``N``-row table at their own width, ``b_i = sqrt(6 / (N + d_i))``
(``N`` = all rows of the layer, not the block's ``n_i``: with every ``d_i = D`` the layer then starts exactly as
a Xavier ``nn.Embedding(N, D)``, so alpha = 0 stays the uniform baseline), and every projection ``P_i (d_i, D)``
is an ordinary Xavier matrix. A per-field CTR layer (one block per field) is its own table, ``N = n_i``.

Example:
    >>> import torch
    >>> from torch import nn
    >>> table = init_embedding_(nn.Embedding(94, 6), "xavier_uniform")
    >>> bool(table.weight.abs().max() <= 0.25)  # b = sqrt(6 / 100)
    True
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
from torch import nn

from embreg.embeddings.bag import MixedDimensionEmbeddingBag
from embreg.embeddings.mixed_dimension import MixedDimensionEmbedding

__all__ = ["EMBEDDING_INITS", "init_embedding_"]

EmbeddingInit = Literal["normal", "xavier_uniform"]
EMBEDDING_INITS: tuple[str, ...] = get_args(EmbeddingInit)


def _md_layer(table: nn.Module) -> MixedDimensionEmbedding | None:
    """The mixed-dimension layer inside ``table``, None for a plain table; other modules raise ``TypeError``."""
    if isinstance(table, MixedDimensionEmbeddingBag):
        return table.embedding
    if isinstance(table, MixedDimensionEmbedding):
        return table
    if isinstance(table, (nn.Embedding, nn.EmbeddingBag)):
        return None
    raise TypeError(
        f"cannot initialise a {type(table).__name__}: expected nn.Embedding, nn.EmbeddingBag, "
        "MixedDimensionEmbedding or MixedDimensionEmbeddingBag"
    )


def _xavier_md_(layer: MixedDimensionEmbedding) -> None:
    """Rows of block i from ``U(-b_i, b_i)``, ``b_i = sqrt(6 / (N + d_i))``; projections Xavier (d_i, D)."""
    for block in layer.blocks:
        bound = math.sqrt(6.0 / (layer.num_embeddings + block.weight.shape[1]))
        nn.init.uniform_(block.weight, -bound, bound)
        if block.projection is not None:
            nn.init.xavier_uniform_(block.projection)


@torch.no_grad()
def init_embedding_(table: nn.Module, scheme: EmbeddingInit, *, std: float = 0.1) -> nn.Module:
    """Re-initialises ``table`` in place and returns it.

    Args:
        table: ``nn.Embedding``, ``nn.EmbeddingBag``, :class:`MixedDimensionEmbedding` or
            :class:`MixedDimensionEmbeddingBag`.
        scheme: ``"normal"``: rows ``N(0, std^2)``, and in a mixed-dimension layer projections
            ``N(0, 1 / d_i)`` (the layer's own :meth:`~MixedDimensionEmbedding.reset_parameters`);
            ``"xavier_uniform"``: a plain ``(n, d)`` table and every projection ``P_i (d_i, D)`` from ``U(-b, b)``,
            ``b = sqrt(6 / (rows + columns))``; the rows of block ``i`` with ``b_i = sqrt(6 / (N + d_i))``
            (see the module docstring; paper Appendix H-I).
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
    layer = _md_layer(table)
    if layer is not None and scheme == "xavier_uniform":
        _xavier_md_(layer)
    elif layer is not None:
        layer.init_std = float(std)
        layer.reset_parameters()
    elif isinstance(table, (nn.Embedding, nn.EmbeddingBag)):  # always, when _md_layer found no layer
        if scheme == "xavier_uniform":
            nn.init.xavier_uniform_(table.weight)
        else:
            nn.init.normal_(table.weight, std=std)
    if isinstance(table, nn.Embedding) and table.padding_idx is not None:
        table.weight[table.padding_idx].zero_()
    return table

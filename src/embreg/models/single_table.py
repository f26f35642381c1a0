"""One embedding table of a model that builds the rest of itself: the recipe's ``embeddings`` entry, or the model's own.

SASRec's item table and the LSTM language model's token table serve both the input and the output scores (the
output layer reads every row). With ``embeddings: {name: md, ...}`` the table is a mixed-dimension one
(mixed-dimension-embeddings.txt, Alg. 3 blocking of the ids by their training counts, Alg. 1 sizing), and the
output reads its projected rows ``E_i[j] @ P_i`` (``full_weight()``). With ``uniform`` the model keeps the table
it has always built (its own initialisation), so stored results are unchanged.

Sparse gradients (``embeddings: {sparse: true}``) are refused for these models: the output layer differentiates
every row each step, so the gradient is dense anyway.

Example:
    >>> from embreg.recipes import load_recipe
    >>> from embreg.recipes.context import BuildContext
    >>> context = BuildContext(load_recipe("sasrec"), prepared=None, seed=0)
    >>> recipe_table(context, "item", 50, init="normal", init_std=0.1, model="sasrec") is None  # uniform
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from embreg.embeddings.builder import MixedDimensionPlan
from embreg.embeddings.table_init import EmbeddingInit
from embreg.embeddings.tables import TableRequest
from embreg.errors import ConfigError

__all__ = ["recipe_table"]


def recipe_table(
    context: Any, kind: str, dim: int, *, init: EmbeddingInit, init_std: float, model: str
) -> tuple[nn.Module, MixedDimensionPlan] | None:
    """The table of id kind ``kind`` built by the recipe's ``embeddings`` entry, or ``None`` for ``uniform``.

    Args:
        context: the :class:`~embreg.recipes.context.BuildContext` (its recipe, and training counts of ``kind``).
        kind: the id kind whose training counts size the table (``item``, ``token``).
        dim: the model's width for it (the base dimension unless ``embeddings.budget`` sets it).
        init, init_std: the table's initialisation (:func:`embreg.embeddings.init_embedding_`).
        model: the model's name, for errors.

    Returns:
        ``(table, plan)`` with ``table`` over the ``num_ids(kind)`` ids (``table.embedding_dim`` is the plan's base
        dimension), or ``None`` when the recipe asks for ``uniform`` tables (the model builds its own).

    Raises:
        ConfigError: ``embeddings.sparse`` is true (see the module docstring).
    """
    spec = context.recipe.embeddings
    if getattr(spec.config, "sparse", False):
        raise ConfigError(
            f"embeddings.sparse=true is not available for model {model!r}: its output layer reads every row of the "
            f"{kind} table each step, so the gradient is dense; set embeddings.sparse=false"
        )
    if spec.name == "uniform":
        return None
    counts = np.asarray(context.frequencies(kind))
    tables, plan = context.tables(TableRequest([counts], dim=dim, init=init, init_std=init_std))
    if plan is None:
        raise ConfigError(f"embeddings {spec.name!r} built no sizing plan for model {model!r}")
    return tables[0], plan

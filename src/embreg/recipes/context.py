"""What a registered builder is given: :class:`BuildContext`.

Builders of every slot take ``(config, context)``. The context carries what a builder may need from the run, so
builders never reach into other builders' code:

* ``recipe``, ``prepared`` (the task's data), ``seed`` (the training seed);
* ``num_ids(kind)``, ``excluded_ids(kind)``, ``frequencies(kind)``, ``graph(kind, name, relations)``: id counts, training counts and
  side-information graphs of an id kind, from the task adapter;
* ``transforms``: the built index transforms by id kind (models take them);
* ``kind``: the id kind an index transform is being built for;
* ``model``, ``objective``: the built model and objective (for regularisers that read them);
* ``tables(request)``: embedding tables built by the recipe's ``embeddings`` entry (``tables_built`` counts the
  calls: a model that never asks cannot honour the recipe's ``embeddings`` section, which is then refused).

Example:
    >>> from embreg.recipes import load_recipe
    >>> ctx = BuildContext(load_recipe("mf"), prepared=None, seed=0)
    >>> ctx.seed, ctx.kind
    (0, None)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from torch import nn

__all__ = ["BuildContext"]


@dataclass
class BuildContext:
    """See the module docstring."""

    recipe: Any
    prepared: Any
    seed: int
    transforms: dict[str, nn.Module] = field(default_factory=dict)
    kind: str | None = None
    model: nn.Module | None = None
    objective: Any = None
    tables_built: int = 0

    @property
    def adapter(self) -> Any:
        return self.recipe.adapter

    def num_ids(self, kind: str | None = None) -> int:
        """How many ids of ``kind`` (default: the kind being built) exist."""
        return int(self.adapter.num_ids(self.prepared, kind or self._kind()))

    def excluded_ids(self, kind: str | None = None) -> tuple[int, ...]:
        """Ids of ``kind`` that index transforms neither swap nor draw (a tokenizer's special ids; ``()``: none)."""
        return tuple(self.adapter.excluded_ids(self.prepared, kind or self._kind()))

    def frequencies(self, kind: str | None = None) -> Any:
        """Training counts of every id of ``kind``, a 1-D array."""
        return self.adapter.frequencies(self.prepared, kind or self._kind())

    def graph(self, name: str, relations: Any = None, kind: str | None = None) -> Any:
        """The named neighbour graph over ids of ``kind`` (:class:`embreg.sse.NeighbourGraph`)."""
        return self.adapter.graph(self.prepared, kind or self._kind(), name, relations)

    def tables(self, request: Any) -> Any:
        """Embedding tables for ``request`` (:class:`embreg.embeddings.tables.TableRequest`), built by the recipe's
        ``embeddings`` entry: ``(modules, plan)``."""
        self.tables_built += 1
        return self.recipe.embeddings.build(request)

    def for_kind(self, kind: str) -> BuildContext:
        """A copy of this context for building the transform of id kind ``kind``."""
        return dataclasses.replace(self, kind=kind)

    def _kind(self) -> str:
        if self.kind is None:
            raise ValueError("this builder needs an id kind; build it with context.for_kind(kind)")
        return self.kind

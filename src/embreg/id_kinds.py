"""Id kinds of the recipe grammar's ``index_transforms`` section, and how they become built transforms.

``user``, ``item``, ``token`` and ``label`` name one kind of ids each. ``field`` names the categorical fields of a
click table (task ``ctr``), which have one vocabulary each:

* ``field:<name>`` (e.g. ``field:workclass``): a transform on field ``<name>`` only, drawing within that field's
  ids;
* ``field``: one transform *per field*, each with its own field's id count and its own random stream, all with
  the same settings.

A recipe names either ``field`` or ``field:<name>`` entries, not both (which one would act on a named field would be
a guess). Field names are checked against the data when the run is built.

Example:
    >>> id_kind_base("field:workclass"), id_kind_base("item"), field_kind("age")
    ('field', 'item', 'field:age')
    >>> check_id_kinds(["field", "field:age"], ("user", "item", "token", "label", "field"))
    Traceback (most recent call last):
    ...
    embreg.errors.ConfigError: index_transforms: 'field' acts on every field, so 'field:age' would act twice; name either 'field' or fields one by one
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from torch import nn

from embreg.errors import ConfigError

__all__ = ["FIELD_KIND", "id_kind_base", "field_kind", "check_id_kinds", "build_index_transforms"]

FIELD_KIND = "field"
"""The id kind of a click table's categorical fields (``field`` or ``field:<name>``)."""


def id_kind_base(kind: str) -> str:
    """The kind a recipe key names: ``field`` for ``field:<name>``, the key itself otherwise."""
    base, sep, _ = kind.partition(":")
    return base if sep and base == FIELD_KIND else kind


def field_kind(name: str) -> str:
    """The id kind of one field: ``field:<name>``."""
    return f"{FIELD_KIND}:{name}"


def check_id_kinds(kinds: Iterable[str], valid: Sequence[str]) -> None:
    """Refuses an unknown id kind (naming the closest), ``field:`` without a name, and ``field`` beside ``field:<name>``.

    Raises:
        ConfigError: naming the bad key and the valid kinds.
    """
    kinds = list(kinds)
    for kind in kinds:
        if kind == f"{FIELD_KIND}:":
            raise ConfigError(f"index_transforms.{kind}: name a field after 'field:' (e.g. field:age), or use 'field'")
        if id_kind_base(kind) not in valid:
            close = difflib.get_close_matches(kind, valid, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"index_transforms.{kind}: unknown id kind{hint} Id kinds: {', '.join(valid)} "
                f"(and {FIELD_KIND}:<name> for one field)"
            )
    named = [kind for kind in kinds if kind != FIELD_KIND and id_kind_base(kind) == FIELD_KIND]
    if FIELD_KIND in kinds and named:
        raise ConfigError(
            f"index_transforms: 'field' acts on every field, so {named[0]!r} would act twice; name either 'field' or "
            "fields one by one"
        )


def build_index_transforms(recipe: Any, context: Any) -> dict[str, nn.Module]:
    """The recipe's index transforms by the id kind each acts on, ``field`` expanded to one per field.

    Args:
        recipe: the :class:`~embreg.recipes.recipe.Recipe`.
        context: its :class:`~embreg.recipes.context.BuildContext` (prepared data, seed).

    Returns:
        ``{kind: transform}``; each is built with ``context.for_kind(kind)``, so it draws within that kind's ids.
    """
    transforms: dict[str, nn.Module] = {}
    for key, spec in recipe.index_transforms.items():
        for kind in recipe.adapter.expand_id_kind(context.prepared, key):
            transforms[kind] = spec.build(context.for_kind(kind))
    return transforms

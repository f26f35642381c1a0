"""What ``embreg show`` prints: a recipe as YAML with every default filled in, and a commented stub for each empty
section a user may fill (``index_transforms``, ``regularizers``), so that they see it exists and how it is written.

The stubs are YAML comments: the text loads back to the same recipe, and a section appended to it (``regularizers:
[{name: r3f}]``) is not a duplicate key.

Example:
    >>> from embreg.recipes import load_recipe
    >>> text = show_text(load_recipe("mf"))
    >>> [line.split(":")[0] for line in text.splitlines() if line.startswith("# index_transforms")]
    ['# index_transforms']
"""

from __future__ import annotations

from typing import Any

import yaml

from embreg.config import to_dict

__all__ = ["show_text", "section_stub"]

STUBBED = ("index_transforms", "regularizers")
"""The sections that get a commented stub when empty."""


def _id_kinds(recipe: Any) -> tuple[str, ...]:
    from embreg.registry import REGISTRY
    from embreg.tasks import model_id_kinds

    return model_id_kinds(REGISTRY.get("model", recipe.model.name), recipe.model.config)


def section_stub(recipe: Any, key: str) -> str:
    """A one-line YAML comment showing how the empty section ``key`` of ``recipe`` is written.

    Args:
        recipe: a loaded :class:`embreg.recipes.recipe.Recipe`.
        key: ``index_transforms`` or ``regularizers``.

    Example:
        >>> from embreg.recipes import load_recipe
        >>> section_stub(load_recipe("mf"), "index_transforms")
        '# index_transforms: {}   # per id kind (user, item), e.g. {item: {name: sse-se, p: 0.01}}; names: embreg list'
    """
    from embreg.registry import REGISTRY

    if key == "index_transforms":
        kinds = _id_kinds(recipe)
        if not kinds:
            return "# index_transforms: {}   # this model takes no index transforms"
        kind = "item" if "item" in kinds else kinds[0]
        return (
            f"# index_transforms: {{}}   # per id kind ({', '.join(kinds)}), e.g. {{{kind}: {{name: sse-se, p: 0.01}}}}; "
            "names: embreg list"
        )
    if key == "regularizers":
        from embreg.registry import missing_capabilities

        provides = REGISTRY.get("model", recipe.model.name).provides
        names = [
            n
            for n in REGISTRY.names("regularizer")
            if not missing_capabilities(REGISTRY.get("regularizer", n).requires, provides)
        ]
        if not names:
            return "# regularizers: []   # this model offers none of the regularisers' hooks (embreg list)"
        return f"# regularizers: []   # e.g. [{{name: {names[0]}}}]; on this model: {', '.join(names)} (embreg list)"
    raise ValueError(f"no stub for section {key!r}; stubbed sections: {', '.join(STUBBED)}")


def show_text(recipe: Any, title: str = "") -> str:
    """The YAML of ``recipe`` with every default, empty sections left out or, for :data:`STUBBED`, commented.

    Args:
        recipe: a loaded :class:`embreg.recipes.recipe.Recipe`.
        title: an optional first comment line.
    """
    lines = [f"# {title}"] if title else []
    for key, value in to_dict(recipe).items():
        if value in ({}, [], None, ""):
            if key in STUBBED:
                lines.append(section_stub(recipe, key))
            continue
        lines.append(yaml.safe_dump({key: value}, sort_keys=False, width=120).rstrip("\n"))
    return "\n".join(lines) + "\n"

"""Every recipe setting reaches the model or is refused: the checks behind a model's declarations.

A model states the embedding kinds, id kinds and capabilities it takes when it registers (see
:mod:`embreg.registry`). :func:`check_model_accepts` holds a recipe to them when it is loaded, before any data is
read, with a :class:`~embreg.errors.ConfigError` naming the model, the bad value and what the model takes (the id
kinds and capabilities are checked beside the task's own checks, :meth:`embreg.tasks.TaskAdapter.check`).
Settings that matter only in some combinations are refused in the others (``model.init_std`` with
``model.init: xavier_uniform``).

:func:`check_tables_reached` is the backstop after the model is built: a model that built its tables without the
recipe's ``embeddings`` entry (a pretrained encoder's, or SASRec's and the language model's own uniform tables)
would ignore any argument of that section, so anything but ``{name: uniform}`` with its defaults is then refused.

Example:
    >>> from embreg.recipes import load_recipe
    >>> load_recipe("ft-reviews", ["embeddings={name: md, alpha: 0.3}"])
    Traceback (most recent call last):
    ...
    embreg.errors.ConfigError: embeddings.name='md': model 'encoder-classifier' does not take 'md' embedding tables; it takes embeddings: uniform
"""

from __future__ import annotations

import dataclasses
from typing import Any

from embreg.errors import ConfigError

__all__ = ["check_model_accepts", "check_tables_reached", "DEFAULT_EMBEDDINGS"]

DEFAULT_EMBEDDINGS = "uniform"
"""The embedding kind a recipe gets when it names none."""


def check_model_accepts(recipe: Any) -> None:
    """Refuses a recipe whose model would silently drop one of its settings.

    Args:
        recipe: a :class:`~embreg.recipes.recipe.Recipe` (its model section already parsed).

    Raises:
        ConfigError: the model does not take the recipe's embedding kind; or a model field is set where the
            model's other settings make it unused (``init_std`` with ``init: xavier_uniform``).
    """
    model = recipe.model.entry
    taken = tuple(model.extra.get("embeddings", ()))
    name = recipe.embeddings.name
    if name not in taken:
        raise ConfigError(
            f"embeddings.name={name!r}: model {model.name!r} does not take {name!r} embedding tables; it takes "
            f"embeddings: {', '.join(taken) or 'none'}"
        )
    _check_init_std(model.name, recipe.model.config)


def _check_init_std(model: str, config: Any) -> None:
    """``init_std`` is the scale of ``init: normal`` only: a value other than its default with another scheme is
    refused (the tables would start from the other scheme's scale)."""
    if getattr(config, "init", "normal") == "normal" or not hasattr(config, "init_std"):
        return
    default = {f.name: f.default for f in dataclasses.fields(config)}.get("init_std")
    if config.init_std != default:
        raise ConfigError(
            f"model.init_std={config.init_std}: model {model!r} uses init_std only with init: normal, and "
            f"init={config.init!r} draws its own scale; set model.init=normal or leave init_std at {default}"
        )


def check_tables_reached(recipe: Any, model_name: str, tables_built: int) -> None:
    """Refuses a non-default ``embeddings`` section when the built model made no table through it.

    Args:
        recipe: the recipe being built.
        model_name: the registered model.
        tables_built: how many times the model's builder asked the recipe's ``embeddings`` entry for tables
            (:meth:`embreg.recipes.context.BuildContext.tables`).

    Raises:
        ConfigError: ``tables_built == 0`` and the section is not ``{name: uniform}`` with its defaults.
    """
    if tables_built:
        return
    section = recipe.embeddings.__config_to__()
    default = type(recipe.embeddings)(DEFAULT_EMBEDDINGS).__config_to__()
    if section == default:
        return
    changed = {key: value for key, value in section.items() if default.get(key) != value}
    shown = ", ".join(f"embeddings.{key}={_yaml(value)}" for key, value in changed.items())
    raise ConfigError(
        f"{shown}: model {model_name!r} builds its own embedding tables and would ignore the setting; it takes "
        f"embeddings: {{{', '.join(f'{key}: {_yaml(value)}' for key, value in default.items())}}} (the defaults)"
    )


def _yaml(value: Any) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)

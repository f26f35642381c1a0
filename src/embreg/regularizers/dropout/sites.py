"""Choosing a model's dropout sites and their coefficients by name.

A model that supports the analytic dropout regularisers implements
``dropout_sites(batch, output) -> {name: DropoutSite}`` for the tensors of ``output``'s forward pass (see
:class:`embreg.models.LSTMLanguageModel`). Names may be selected exactly (``"hidden.0"``) or by group, the part
before the first dot (``"hidden"`` selects ``hidden.0``, ``hidden.1``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

from torch import nn

from embreg.errors import EmbregError
from embreg.nn.dropout_sites import DropoutSite

if TYPE_CHECKING:
    from embreg.models.protocols import SiteModel

SiteStructure = Literal["element", "model"]
Coefficients = float | Mapping[str, float]


def resolve_names(available: Iterable[str], requested: Iterable[str] | None) -> list[str]:
    """The site names ``requested`` selects among ``available`` (all of them when ``requested`` is None).

    Raises:
        EmbregError: a requested name or group matches no site (the message lists the model's sites).

    Example:
        >>> resolve_names(["input", "hidden.0", "hidden.1", "output"], ["hidden", "output"])
        ['hidden.0', 'hidden.1', 'output']
    """
    names = list(available)
    if requested is None:
        return names
    chosen: list[str] = []
    for key in requested:
        matches = [n for n in names if n == key or n.split(".", 1)[0] == key]
        if not matches:
            raise EmbregError(
                f"site {key!r} is not in the model; its dropout sites are {names} "
                f"(a group name such as 'hidden' selects every 'hidden.<i>')"
            )
        chosen.extend(m for m in matches if m not in chosen)
    return [n for n in names if n in chosen]


def per_site(value: Coefficients, names: list[str]) -> dict[str, float]:
    """Expands a number, or a mapping from names/groups to numbers, to ``{site: value}`` for ``names``.

    A mapping must give a value for every selected site; exact names take precedence over groups.

    Example:
        >>> per_site({"hidden": 0.5, "output": 1.0}, ["hidden.0", "output"])
        {'hidden.0': 0.5, 'output': 1.0}
    """
    if not isinstance(value, Mapping):
        return {name: float(value) for name in names}
    out: dict[str, float] = {}
    for name in names:
        if name in value:
            out[name] = float(value[name])
        elif name.split(".", 1)[0] in value:
            out[name] = float(value[name.split(".", 1)[0]])
        else:
            raise EmbregError(f"no coefficient for site {name!r}; the mapping has keys {sorted(value)}")
    unknown = [k for k in value if not any(n == k or n.split(".", 1)[0] == k for n in names)]
    if unknown:
        raise EmbregError(f"coefficients for {unknown} match none of the selected sites {names}")
    return out


def model_sites(model: nn.Module, batch: dict, output, structure: SiteStructure) -> dict[str, DropoutSite]:
    """``model.dropout_sites(batch, output)``, with every site's sharing set to ``"element"`` unless ``"model"``."""
    if not hasattr(model, "dropout_sites"):
        raise EmbregError(
            f"{type(model).__name__} has no dropout_sites(batch, output); the analytic dropout "
            "regularisers need a model that names its dropout sites (e.g. LSTMLanguageModel)"
        )
    if structure not in ("element", "model"):
        raise EmbregError(f"structure={structure!r} must be 'element' (eq. 4.4) or 'model' (the model's own sharing)")
    sites: dict[str, DropoutSite] = cast("SiteModel", model).dropout_sites(batch, output)
    if structure == "element":
        sites = {name: site.with_structure("element") for name, site in sites.items()}
    return sites


def site_coefficients(
    groups: Mapping[str, float], chosen: Iterable[str] | None, fixed: float | None, from_q: Callable[[float], float]
) -> dict[str, float]:
    """A coefficient per site group for the analytic terms of a recipe.

    Args:
        groups: the model's site groups and their dropout probabilities ``q`` (e.g. ``{"input": 0.4, ...}``).
        chosen: the groups the term acts on (``None``: every group with ``q > 0``).
        fixed: one coefficient for every chosen group (``None``: ``from_q(q)`` of each group, App. D.1's
            ``lambda_1 = q / (1 - q)`` or ``lambda_2 = sqrt(q / (1 - q))``).
        from_q: the coefficient of a probability.

    Returns:
        ``{group: coefficient}`` over every group (0 for the groups not chosen).

    Example:
        >>> site_coefficients({"input": 0.5, "output": 0.0}, None, None, lambda q: q / (1 - q))
        {'input': 1.0, 'output': 0.0}
    """
    names = [g for g, q in groups.items() if q > 0] if chosen is None else list(chosen)
    unknown = [name for name in names if name not in groups]
    if unknown:
        raise EmbregError(f"sites {unknown} are not among the model's dropout site groups {sorted(groups)}")
    out = {}
    for group, q in groups.items():
        if group not in names:
            out[group] = 0.0
        elif fixed is not None:
            out[group] = fixed
        else:
            out[group] = from_q(q) if q > 0 else 0.0
    return out


def recipe_dropout_groups(context: Any) -> dict[str, float]:
    """The dropout probability of each site group of a recipe's model (its config's ``dropout_groups()``)."""
    config = context.recipe.model.config
    groups = getattr(config, "dropout_groups", None)
    if groups is None:
        raise EmbregError(f"model {context.recipe.model.name!r} states no dropout site groups")
    return groups()

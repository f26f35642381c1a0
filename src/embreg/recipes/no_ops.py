"""Techniques that do nothing as configured: one :class:`NoOpWarning` when the run is built.

A recipe may pair a technique with a model on which, as configured, it cannot act: the Dropout_k objective on a
model with no active dropout block makes one pass per step (exactly the standard loss,
dropout-explicit-implicit-regularization.txt, Alg. 1); the analytic dropout terms (R_approx, xi_approx) with every
site's coefficient 0 (a model whose dropout probabilities are all 0); the two-mask noise with ``k = 1`` or without
active dropout. Such a run trains, and its result is that of the run without the technique, so the builder warns
(once, with what is a no-op and why) rather than refusing a valid ablation.

Example:
    >>> import warnings
    >>> from embreg.recipes import load_recipe
    >>> from embreg.recipes.context import BuildContext
    >>> from embreg.models import LSTMLanguageModel
    >>> recipe = load_recipe("lm-none", ["objective={name: dropout-k, k: 4}"])
    >>> context = BuildContext(recipe, prepared=None, seed=0, model=LSTMLanguageModel.build(20, 8, 8, 1))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = recipe.objective.build(context)
    >>> print(caught[0].message)  # doctest: +ELLIPSIS
    objective 'dropout-k' is a no-op: model 'lstm-lm' has no active dropout ...
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from torch import nn

from embreg.nn.dropout_control import has_dropout

__all__ = ["NoOpWarning", "no_op_reason", "warn_no_op"]


class NoOpWarning(UserWarning):
    """A technique of the recipe leaves training exactly as it would be without it."""


def warn_no_op(spec: Any, built: Any, context: Any) -> None:
    """Warns with :class:`NoOpWarning` when ``built`` (the object ``spec`` built) is a no-op on ``context.model``.

    Args:
        spec: the recipe's objective or regulariser section (:class:`~embreg.recipes.recipe.Component`).
        built: what its builder returned.
        context: the build context (:class:`~embreg.recipes.context.BuildContext`), with the model built.
    """
    reason = no_op_reason(built, getattr(context, "model", None), getattr(context, "recipe", None))
    if reason is not None:
        kind = spec.entry.slot.replace("_", " ")
        warnings.warn(f"{kind} {spec.name!r} is a no-op: {reason}", NoOpWarning, stacklevel=3)


def no_op_reason(built: Any, model: nn.Module | None, recipe: Any = None) -> str | None:
    """Why ``built`` does nothing on ``model``, or ``None`` when it acts (or nothing can be said).

    Args:
        built: a built objective or regulariser.
        model: the built model (``None``: not known).
        recipe: the recipe (names the model in the reason).

    Example:
        >>> from embreg.regularizers.dropout.objective import DropoutK
        >>> no_op_reason(DropoutK(4), nn.Linear(2, 2))
        'model has no active dropout (no dropout block or torch dropout module with a probability > 0), so Dropout_k makes one forward pass per step: exactly the standard loss'
    """
    from embreg.regularizers.dropout.implicit import TwoMaskDropoutNoise
    from embreg.regularizers.dropout.objective import DropoutK

    name = f"model {recipe.model.name!r}" if recipe is not None and recipe.model is not None else "model"
    no_dropout = model is not None and not _has_active_dropout(model)
    if isinstance(built, DropoutK) and no_dropout:
        return (
            f"{name} has no active dropout (no dropout block or torch dropout module with a probability > 0), so Dropout_k "
            "makes one forward pass per step: exactly the standard loss"
        )
    if isinstance(built, TwoMaskDropoutNoise):
        if built.scale == 0.0:
            return f"with k={built.k} Dropout_k is Dropout_1, which needs no correction"
        if no_dropout:
            return f"{name} has no active dropout, so the two masks are equal and the noise is 0"
    coefficients = getattr(built, "coefficients", None)
    if coefficients is not None and _all_zero(coefficients):
        groups = getattr(getattr(getattr(recipe, "model", None), "config", None), "dropout_groups", None)
        probabilities = f" (its dropout probabilities: {groups()})" if callable(groups) else ""
        return f"its coefficient is 0 at every dropout site of {name}{probabilities}"
    return None


def _has_active_dropout(model: nn.Module) -> bool:
    """Whether a training-mode forward of ``model`` draws a mask (:func:`embreg.nn.dropout_control.has_dropout`)."""
    return has_dropout(model)


def _all_zero(coefficients: Any) -> bool:
    if isinstance(coefficients, Mapping):
        return bool(coefficients) and all(float(v) == 0.0 for v in coefficients.values())
    return isinstance(coefficients, (int, float)) and float(coefficients) == 0.0

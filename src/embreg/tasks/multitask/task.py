"""The ``data`` settings of multi-task text classification: ``task: multi``, ``targets``, ``loss_weights``.

A multi-task run trains one shared text model (``encoder-classifier``, ``text-cnn`` or ``bilstm-attn``) with one
head per target, on the clothing reviews' class targets (:data:`embreg.data.datasets.reviews.REVIEW_TARGETS`)::

    task: classification
    data: {dataset: reviews, task: multi, targets: [recommended, rating], loss_weights: [1.0, 0.5]}

The loss is ``sum_k loss_weights[k] * CE_k`` (:mod:`embreg.models.text_heads`); each head's metrics are reported
as ``test_<metric>_<target>`` and the best epoch is chosen on ``val_multitask_score``
(:mod:`embreg.tasks.multitask.evaluation`). The targets and their weights belong to the data section because they
say what the run learns, whatever the model: one place serves every text model, and a single-task run refuses
them.

Example:
    >>> from embreg.recipes import load_recipe
    >>> load_recipe("ft-reviews-multitask").monitor
    ('val_multitask_score', 'max')
"""

from __future__ import annotations

import math
from typing import Any

from embreg.errors import ConfigError

__all__ = ["check_multitask", "check_multitask_techniques", "DEFAULT_TARGETS"]

DEFAULT_TARGETS = ("recommended", "rating")


def check_multitask(data: Any) -> None:
    """Checks ``targets`` and ``loss_weights`` of a labelled-text ``data`` section (filling ``targets`` in).

    Raises:
        ConfigError: either set on a single-task section; ``task: multi`` on another dataset than ``reviews``;
            unknown or repeated targets, fewer than two; a weight count that differs from the targets', a weight
            that is negative, not finite or not a number, or every weight 0.
    """
    from embreg.data.datasets.reviews import REVIEW_TARGETS

    if data.task != "multi":
        for key in ("targets", "loss_weights"):
            if getattr(data, key) is not None:
                raise ConfigError(
                    f"data.{key}={getattr(data, key)!r} is read by data.task='multi' only (data.task="
                    f"{data.task!r}); remove it or set data.task=multi"
                )
        return
    if data.dataset != "reviews":
        hint = (
            "; a file of yours has one label column (data.label_col): train it with a single-task recipe such as "
            "ft-reviews or cls-cnn-reviews"
            if data.dataset == "file"
            else ""
        )
        raise ConfigError(
            f"data.task='multi' needs data.dataset='reviews' (targets {', '.join(REVIEW_TARGETS)}), got "
            f"{data.dataset!r}{hint}"
        )
    if data.targets is None:
        data.targets = list(DEFAULT_TARGETS)
    targets = data.targets
    if not isinstance(targets, list) or any(t not in REVIEW_TARGETS for t in targets):
        raise ConfigError(f"data.targets={targets!r} must be a list of {', '.join(REVIEW_TARGETS)}")
    if len(targets) < 2 or len(set(targets)) != len(targets):
        raise ConfigError(f"data.targets={targets!r} must name two or more distinct targets")
    weights = data.loss_weights
    if weights is None:
        return
    if not isinstance(weights, list) or len(weights) != len(targets):
        raise ConfigError(
            f"data.loss_weights={weights!r} must be a list of {len(targets)} numbers, one per target {targets}"
        )
    for target, weight in zip(targets, weights, strict=True):
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"data.loss_weights: {weight!r} for target {target!r} must be a finite number >= 0")
    if not any(w > 0 for w in weights):
        raise ConfigError(f"data.loss_weights={weights} are all 0: at least one target must count in the loss")


def check_multitask_techniques(recipe: Any) -> None:
    """Refuses regularisers that compare the model's predicted class distributions (a ``divergence`` setting: R3F,
    SMART): they read one softmax over each example's logits, and a multi-task model's logits hold one
    distribution per target side by side.

    Raises:
        ConfigError: such a regulariser in a ``data.task: multi`` recipe.
    """
    for index, spec in enumerate(recipe.regularizers):
        if hasattr(spec.config, "divergence"):
            raise ConfigError(
                f"regularizers[{index}]: {spec.name!r} compares one predicted class distribution per example, and "
                f"data.task='multi' gives one per target ({', '.join(recipe.data.targets)}); use it on a "
                "single-task run"
            )

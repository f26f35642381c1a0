"""The ``distill`` objective's builder: loads the teacher runs (:mod:`embreg.regularizers.distillation`).

Knowledge distillation (nlp-best-practices.txt, "Ensembling"; Hinton et al. 2015, Sec. 2) learns from trained runs:
loading them is serving's job (:func:`embreg.serving.load`), so the objective is registered here, above the
recipes that build it, while its loss lives with the other objectives in :mod:`embreg.regularizers.distillation`.

Example:
    >>> from embreg.registry import REGISTRY
    >>> REGISTRY.get("objective", "distill").extra["tasks"]
    ('classification',)
"""

from __future__ import annotations

from typing import Any

from torch import nn

from embreg.errors import ConfigError
from embreg.registry import register
from embreg.regularizers.distillation import DISTILL_TASKS, Distillation, DistillationConfig
from embreg.serving.ensemble import check_same_data, data_fingerprint, run_directories
from embreg.serving.loading import load

__all__ = ["load_teachers", "build_distillation"]


def load_teachers(config: DistillationConfig, context: Any) -> list[nn.Module]:
    """The teachers' models, loaded from their run directories and checked against the student's task and data.

    Raises:
        ConfigError: no teachers named, or a teacher of another task or data than the student's recipe.
        DataError: a teacher directory that is not a finished run (:func:`embreg.serving.load`).
    """
    if not config.teachers:
        raise ConfigError(
            "objective 'distill' needs its teachers: objective.teachers=[RUN_DIR, ...] (finished runs on this "
            "recipe's data, e.g. the seeds of an 'embreg run ... --seeds N')"
        )
    runs = [load(path, checkpoint=config.checkpoint) for path in run_directories(config.teachers)]
    check_same_data(runs, "distillation")
    recipe = context.recipe
    teacher = runs[0]
    if teacher.task != recipe.task:
        raise ConfigError(
            f"objective.teachers: {str(teacher.path)!r} is a {teacher.task!r} run, the student a {recipe.task!r} one"
        )
    if context.prepared is not None and data_fingerprint(teacher.prepared) != data_fingerprint(context.prepared):
        raise ConfigError(
            f"objective.teachers: {str(teacher.path)!r} was trained on other data or tokenisation than this recipe's "
            "(its model would read the student's batches as other inputs); train the teachers on this recipe's data"
        )
    return [run.model for run in runs]


@register(
    "objective",
    "distill",
    config=DistillationConfig,
    summary="knowledge distillation: learn from the averaged soft targets of teacher runs at temperature T "
    "(classification)",
    reference="nlp-best-practices.txt, 'Ensembling' (Hinton et al. 2015, Sec. 2)",
    tasks=DISTILL_TASKS,
    needs_teachers=True,
)
def build_distillation(config: DistillationConfig, context: Any) -> Distillation:
    """:class:`Distillation` with the teachers of ``config.teachers``."""
    return Distillation(load_teachers(config, context), temperature=config.temperature, alpha=config.alpha)

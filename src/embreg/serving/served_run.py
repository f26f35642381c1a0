"""The parts of a trained run that the serving adapters read: a structural type (:class:`ServedRun`).

:class:`embreg.serving.trained_run.TrainedRun` has every one of them; the adapters it calls (``predict``,
``recommend``, ``score``, ``translate`` of each task) are typed with this protocol, so they never import the run
class that imports them.

Example:
    >>> from embreg.serving.trained_run import TrainedRun
    >>> parts = [*ServedRun.__annotations__, "task", "prepared", "evaluator"]
    >>> [name for name in parts if name not in TrainedRun.__annotations__ and not hasattr(TrainedRun, name)]
    []
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import torch

from embreg.serving.vocabulary import IdVocabulary

__all__ = ["ServedRun"]


class ServedRun(Protocol):
    """A loaded run as its serving adapters see it (see :class:`~embreg.serving.trained_run.TrainedRun`).

    Attributes:
        path: the run directory.
        recipe: the resolved recipe.
        model: the model, in eval mode on ``device``.
        vocabularies: ``{kind: IdVocabulary}``.
        device: where the model is.
        checkpoint: ``"best"``, ``"last"`` or ``"averaged"``.
    """

    path: Path
    recipe: Any
    model: torch.nn.Module
    vocabularies: dict[str, IdVocabulary]
    device: torch.device
    checkpoint: str

    @property
    def task(self) -> str: ...

    @property
    def prepared(self) -> Any: ...

    @property
    def evaluator(self) -> Any: ...

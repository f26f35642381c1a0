"""What ``predict`` returns (:class:`Prediction`) and what it does with ids unseen in training (:data:`UNKNOWN_POLICIES`).

A module of its own below :mod:`embreg.serving.trained_run`, so that the serving adapters of the tasks build
predictions without importing the run class that calls them.

Example:
    >>> import pandas as pd
    >>> p = Prediction(pd.DataFrame({"rating": [4.0]}), {"rows": 1, "predicted": 1, "unknown": 0, "fallback": 0,
    ...     "skipped": 0})
    >>> p.summary_line()
    '1 rows: 1 predicted, 0 with ids unseen in training (0 given the training mean, 0 skipped)'
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

__all__ = ["Prediction", "UNKNOWN_POLICIES"]

UNKNOWN_POLICIES = ("mean", "error", "skip")
"""What ``predict`` does with a row holding an id never seen in training: ``mean`` predicts the training mean
(ratings: the mean training rating, or for models with bias tables, BiasedMF, their global mean plus the bias of the
user or item that is known; clicks: the training click rate) and marks the row ``status=mean``; ``error``
refuses the input naming the ids; ``skip`` leaves the row out. Each is counted in :attr:`Prediction.summary`."""


@dataclass
class Prediction:
    """Predictions for input rows, on the input's original ids.

    Attributes:
        table: one row per input row kept: the input's id columns, the prediction columns (``rating`` |
            ``click_probability``) and ``status`` (``ok``; ``mean`` where the unknown-id policy gave the training
            mean; ``non-finite`` where the model's output is NaN or infinite, as a failed run's weights give). For
            texts: every column of the input (a text file or a list: ``text``), the prediction columns (``label``
            and ``probability``, one pair per target of a multi-task run, or ``value``; named ``predicted_<name>``
            where the input has a column of that name) and ``status`` (``ok``, ``non-finite``, or ``empty`` for a
            blank text, which gets no prediction).
        summary: ``rows``, ``predicted``, ``unknown`` (rows with an unseen id), ``fallback``, ``skipped`` and
            ``non_finite``; for texts ``rows``, ``predicted``, ``empty``, ``cut`` (texts cut to ``data.max_length``
            word pieces), ``unknown_pieces`` (``[UNK]`` word pieces read), ``max_length`` and ``non_finite``.
        kind: ``"rows"``, ``"texts"`` for classification and regression, ``"sentences"`` for tagging.
    """

    table: pd.DataFrame
    summary: dict[str, int]
    kind: str = field(default="rows", kw_only=True)

    def summary_line(self) -> str:
        """One line for the command line, e.g. ``"5 rows: 4 predicted, 1 with ids unseen in training (1 given the
        training mean, 0 skipped)"`` or ``"4 texts: 4 predicted, 0 empty; 1 cut to data.max_length=64 word pieces,
        0 unknown word pieces ([UNK])"``."""
        s = self.summary
        bad = s.get("non_finite", 0)
        not_finite = f"; {bad} predictions are not finite (status non-finite)" if bad else ""
        if self.kind == "texts":
            return (
                f"{s['rows']} texts: {s['predicted']} predicted, {s['empty']} empty; {s['cut']} cut to "
                f"data.max_length={s['max_length']} word pieces, {s['unknown_pieces']} unknown word pieces ([UNK])"
                + not_finite
            )
        return (
            f"{s['rows']} rows: {s['predicted']} predicted, {s['unknown']} with ids unseen in training "
            f"({s['fallback']} given the training mean, {s['skipped']} skipped)" + not_finite
        )

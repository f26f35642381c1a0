"""A trained run ready to use: its model in eval mode, recipe, data and id vocabularies (built by
:func:`embreg.serving.load`), with the ``predict``, ``recommend`` and ``score`` methods the commands call.

======================================  =====================================================================
method                                  tasks
======================================  =====================================================================
``predict(rows, unknown=...)``          rating (rating), ctr (click probability), classification (class and
                                        its probability), regression (value), tagging (a tag per token:
                                        :class:`~embreg.serving.tagging.TaggedSentences`)
``recommend(users, k, ...)``            ranking, next-item (top-k unseen items per user, original ids)
``score(texts)``                        lm (per-line and total perplexity)
``translate(lines, beam=, alpha=, ...)``  translation (decoded sentences)
======================================  =====================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from embreg.errors import ConfigError
from embreg.serving.vocabulary import IdVocabulary

__all__ = ["TrainedRun", "Prediction", "UNKNOWN_POLICIES"]

UNKNOWN_POLICIES = ("mean", "error", "skip")
"""What ``predict`` does with a row holding an id never seen in training: ``mean`` predicts the training mean
(ratings: the mean training rating, or for models with bias tables, BiasedMF, their global mean plus the bias of the
user or item that is known; clicks: the training click rate) and marks the row ``status=mean``; ``error``
refuses the input naming the ids; ``skip`` leaves the row out. Each is counted in :attr:`Prediction.summary`."""


@dataclass
class Prediction:
    """Predictions for input rows, on the input's original ids.

    Attributes:
        table: one row per input row kept: the input's id columns (or ``text``), the prediction columns
            (``rating`` | ``click_probability`` | ``label`` and ``probability`` | ``value``) and ``status``
            (``ok``; ``mean`` where the unknown-id policy gave the training mean; ``non-finite`` where the model's
            output is NaN or infinite, as a failed run's weights give).
        summary: ``rows``, ``predicted``, ``unknown`` (rows with an unseen id), ``fallback``, ``skipped`` and
            ``non_finite``.
    """

    table: pd.DataFrame
    summary: dict[str, int]

    def summary_line(self) -> str:
        """One line for the command line, e.g. ``"5 rows: 4 predicted, 1 with unseen ids (1 mean, 0 skipped)"``."""
        s = self.summary
        bad = s.get("non_finite", 0)
        return (
            f"{s['rows']} rows: {s['predicted']} predicted, {s['unknown']} with ids unseen in training "
            f"({s['fallback']} given the training mean, {s['skipped']} skipped)"
            + (f"; {bad} predictions are not finite (status non-finite)" if bad else "")
        )


@dataclass
class TrainedRun:
    """See the module docstring; built by :func:`embreg.serving.load`.

    Attributes:
        path: the run directory.
        recipe: the resolved recipe (``config.yaml``).
        model: the model, in eval mode on ``device``.
        prepared: the task's data, prepared again from the recipe (the same split as in training).
        evaluator: the task's evaluator (``evaluator(model, split)`` gives the run's metrics).
        vocabularies: ``{kind: IdVocabulary}`` (:mod:`embreg.serving.vocabularies`).
        device: where the model is.
        checkpoint: ``"best"``, ``"last"`` or ``"averaged"``.
        epoch: the epoch the checkpoint holds (0-based), where it says.
    """

    path: Path
    recipe: Any
    model: torch.nn.Module
    prepared: Any
    evaluator: Any
    vocabularies: dict[str, IdVocabulary]
    device: torch.device
    checkpoint: str
    epoch: int | None = None

    @property
    def task(self) -> str:
        return str(self.recipe.task)

    def _require(self, tasks: Sequence[str], what: str) -> None:
        if self.task not in tasks:
            raise ConfigError(
                f"{what} serves the {', '.join(tasks)} tasks; run {str(self.path)!r} is a {self.task!r} run"
            )

    def predict(
        self,
        rows: pd.DataFrame | str | Path | Sequence[str] | Sequence[Sequence[str]],
        *,
        unknown: str = "mean",
        input_format: str | None = None,
    ) -> Prediction:
        """Predictions for ``rows``: a file in the training file's format (or a table with its columns; texts for
        classification and regression: a file with one text per line, or the training file's text column;
        sentences for tagging).

        Args:
            rows: a path or a :class:`pandas.DataFrame` (rating: the user and item columns of ``data``; ctr: the
                categorical and dense columns of the training file), or a list of texts; tagging: a list of
                sentences (or of token lists) or a file (:mod:`embreg.serving.tagging`), e.g.
                ``run.predict(["Peter moved to Rome ."]).tags``, one list of tags per sentence such as
                ``[["B-PER", "O", "O", "B-LOC", "O"]]``.
            unknown: one of :data:`UNKNOWN_POLICIES` (tagging: ``mean`` reads an unseen token as ``<unk>``,
                ``error`` refuses it).
            input_format: tagging only: how to read a file, ``auto``, ``lines`` or ``conll``
                (:data:`embreg.serving.tagging.INPUT_FORMATS`; ``None``: ``auto``).

        Raises:
            ConfigError: the run's task has no ``predict``, ``unknown`` is not a policy, or ``input_format`` is
                given to a task other than tagging.
            DataError: an unreadable input, a missing column, or (``unknown='error'``) ids unseen in training.
        """
        from embreg.serving import predicting

        self._require(("rating", "ctr", "classification", "regression", "tagging"), "predict")
        if unknown not in UNKNOWN_POLICIES:
            raise ConfigError(f"unknown={unknown!r} must be one of {', '.join(UNKNOWN_POLICIES)}")
        if self.task == "tagging":
            from embreg.serving.tagging import predict_tags

            return predict_tags(self, rows, unknown, input_format)
        if input_format is not None:
            raise ConfigError(f"input_format={input_format!r} reads tagging input; this is a {self.task!r} run")
        return predicting.predict(self, rows, unknown)

    def recommend(
        self,
        users: Sequence[Any] | None = None,
        *,
        k: int = 10,
        include_seen: bool = False,
        history: Sequence[Any] | None = None,
        batch_size: int = 1024,
    ) -> pd.DataFrame:
        """Top-``k`` items per user, best first: a table with columns ``user, item, rank, score`` (rank from 1).

        Args:
            users: original user ids (``None``: every user the model knows with a history in training).
            k: items per user.
            include_seen: also recommend items the user already has (by default the user's items in the run's
                data are excluded: training, validation and test interactions for ranking; the history for
                next-item).
            history: next-item only: original item ids, oldest first, the history to continue (then ``users``
                must name at most one user; without one the model's user embedding, if any, gets user index 0).
            batch_size: users scored at once.

        Raises:
            ConfigError: not a ranking or next-item run, or ``k`` outside ``[1, items]``.
            DataError: a user (or history item) never seen in training.
        """
        from embreg.serving import recommending

        self._require(("ranking", "next-item"), "recommend")
        return recommending.recommend(self, users, k, include_seen, history, batch_size)

    def score(self, texts: Sequence[str]) -> pd.DataFrame:
        """Perplexity of each text line under the language model, and of all lines together (the last row,
        ``line = "total"``): columns ``line, tokens, unknown, loss, perplexity``.

        Raises:
            ConfigError: not an ``lm`` run.
        """
        from embreg.serving import scoring

        self._require(("lm",), "score")
        return scoring.score(self, texts)

    def translate(self, lines: Sequence[str], **decoding: Any) -> list[str]:
        """Translations of source ``lines`` (``beam``, ``alpha``, ``beta``: :func:`embreg.serving.translating.translate`).

        Raises:
            ConfigError: not a ``translation`` run.
        """
        from embreg.serving import translating

        self._require(("translation",), "translate")
        return translating.translate(self, lines, **decoding)

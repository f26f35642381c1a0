"""A trained run ready to use: its model in eval mode, recipe, data and id vocabularies (built by
:func:`embreg.serving.load`), with the ``predict``, ``recommend`` and ``score`` methods the commands call.

======================================  =====================================================================
method                                  tasks
======================================  =====================================================================
``predict(rows, unknown=...)``          rating (rating), ctr (click probability), classification (class and
                                        its probability), regression (value), tagging (a tag per token:
                                        :class:`~embreg.tasks.tagging.serving.TaggedSentences`)
``recommend(users, k, ...)``            ranking, next-item (top-k unseen items per user, original ids)
``score(texts)``                        lm (per-line and total perplexity)
``translate(lines, beam=, alpha=, ...)``  translation (decoded sentences)
======================================  =====================================================================

Every argument that takes several items (``translate(lines)``, ``score(texts)``, ``predict`` on a list of texts,
``recommend(users, history=)``) takes a list, even of one item; a single ``str`` there is refused with the fix
(:func:`embreg.data.files.inputs.item_list`), never taken character by character. ``predict`` takes a ``str`` or a
path as the name of an input file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch

from embreg.errors import ConfigError
from embreg.serving.prediction import UNKNOWN_POLICIES, Prediction
from embreg.serving.vocabulary import IdVocabulary

if TYPE_CHECKING:
    from embreg.tasks.translation.serving import Translations

__all__ = ["TrainedRun", "RunData", "Prediction", "UNKNOWN_POLICIES"]


class RunData:
    """A loaded run's prepared data and evaluator, given at once or prepared on first use by ``prepare``.

    Args:
        prepared, evaluator: the task's data and evaluator, when already built.
        prepare: ``() -> (prepared, evaluator)``, called once when either is first asked for (a text run serves new
            texts without its training data: :meth:`embreg.tasks.TaskAdapter.serving_data`).
    """

    def __init__(
        self, prepared: Any = None, evaluator: Any = None, prepare: Callable[[], tuple[Any, Any]] | None = None
    ) -> None:
        self._parts = None if prepare is not None else (prepared, evaluator)
        self._prepare = prepare

    def parts(self) -> tuple[Any, Any]:
        """``(prepared, evaluator)``, prepared now if they were not yet."""
        if self._parts is None:
            assert self._prepare is not None
            self._parts = self._prepare()
        return self._parts


@dataclass
class TrainedRun:
    """See the module docstring; built by :func:`embreg.serving.load`.

    Attributes:
        path: the run directory.
        recipe: the resolved recipe (``config.yaml``).
        model: the model, in eval mode on ``device``.
        data: the task's prepared data and evaluator (:attr:`prepared`, :attr:`evaluator`).
        vocabularies: ``{kind: IdVocabulary}`` (:mod:`embreg.serving.vocabularies`).
        device: where the model is.
        checkpoint: ``"best"``, ``"last"`` or ``"averaged"``.
        epoch: the epoch the checkpoint holds (0-based), where it says.
    """

    path: Path
    recipe: Any
    model: torch.nn.Module
    data: RunData
    vocabularies: dict[str, IdVocabulary]
    device: torch.device
    checkpoint: str
    epoch: int | None = None

    @property
    def task(self) -> str:
        return str(self.recipe.task)

    @property
    def prepared(self) -> Any:
        """The task's data, prepared again from the recipe (the same split as in training), checked against the
        records the run wrote. A classification or regression run prepares it only when it is first asked for:
        predictions on new texts do not need it."""
        return self.data.parts()[0]

    @property
    def evaluator(self) -> Any:
        """The task's evaluator (``evaluator(model, split)`` gives the run's metrics); prepared with
        :attr:`prepared`."""
        return self.data.parts()[1]

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
                categorical and dense columns of the training file; texts: a table with the ``data.text_col``
                column, every column of it kept in the output, or a text file of one text per line), or a list
                of texts (a single ``str`` is a path, not a text); tagging: a list of sentences (or of token lists)
                or a file (:mod:`embreg.tasks.tagging.serving`), e.g. ``run.predict(["Peter moved to Rome ."]).tags``,
                one list of tags per sentence such as ``[["B-PER", "O", "O", "B-LOC", "O"]]``.
            unknown: one of :data:`UNKNOWN_POLICIES` (tagging: ``mean`` reads an unseen token as ``<unk>``,
                ``error`` refuses it).
            input_format: tagging only: how to read a file, ``auto``, ``lines`` or ``conll``
                (:data:`embreg.tasks.tagging.serving.INPUT_FORMATS`; ``None``: ``auto``).

        Raises:
            ConfigError: the run's task has no ``predict``, ``unknown`` is not a policy, or ``input_format`` is
                given to a task other than tagging.
            DataError: an unreadable input, a missing column, or (``unknown='error'``) ids unseen in training.
        """
        from embreg.data.files.inputs import item_list
        from embreg.serving import predicting

        self._require(("rating", "ctr", "classification", "regression", "tagging"), "predict")
        if unknown not in UNKNOWN_POLICIES:
            raise ConfigError(f"unknown={unknown!r} must be one of {', '.join(UNKNOWN_POLICIES)}")
        if self.task == "tagging":
            from embreg.tasks.tagging.serving import predict_tags

            return predict_tags(self, rows, unknown, input_format)
        if input_format is not None:
            raise ConfigError(f"input_format={input_format!r} reads tagging input; this is a {self.task!r} run")
        if not isinstance(rows, pd.DataFrame | str | Path):
            rows = item_list(rows, argument="rows", call="predict")
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
            ConfigError: not a ranking or next-item run, ``k`` outside ``[1, items]``, or ``users`` / ``history``
                given as a single value instead of a list.
            DataError: a user (or history item) never seen in training.
        """
        from embreg.data.files.inputs import item_list
        from embreg.serving import recommending

        self._require(("ranking", "next-item"), "recommend")
        if users is not None:
            users = item_list(users, argument="users", call="recommend")
        if history is not None:
            history = item_list(history, argument="history", call="recommend")
        return recommending.recommend(self, users, k, include_seen, history, batch_size)

    def score(self, texts: Sequence[str]) -> pd.DataFrame:
        """Perplexity of each text line (a list of lines, each scored in full) under the language model, and of all
        lines together (the last row, ``line = "total"``): columns ``line, tokens, unknown, loss, perplexity``.

        Raises:
            ConfigError: not an ``lm`` run, or ``texts`` is a single ``str``.
        """
        from embreg.data.files.inputs import item_list
        from embreg.tasks.lm.serving import score

        self._require(("lm",), "score")
        return score(self, item_list(texts, argument="texts", call="score"))

    def translate(self, lines: Sequence[str], **decoding: Any) -> Translations:
        """Translations of source ``lines`` (a list; ``beam``, ``alpha``, ``beta``:
        :func:`embreg.tasks.translation.serving.translate`): a list of ``str`` that also counts the lines cut to
        ``data.max_tokens`` source pieces and the unknown source pieces
        (:class:`~embreg.tasks.translation.serving.Translations`).

        Raises:
            ConfigError: not a ``translation`` run, or ``lines`` is a single ``str``.
        """
        from embreg.data.files.inputs import item_list
        from embreg.tasks.translation.serving import translate

        self._require(("translation",), "translate")
        return translate(self, item_list(lines, argument="lines", call="translate"), **decoding)

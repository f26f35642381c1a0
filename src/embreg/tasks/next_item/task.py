"""Task ``next-item``: sequential recommendation on time-ordered interactions, leave-one-out, two protocols.

Data: MovieLens-100k from the registry or a user's interactions file with a timestamp column (``data.path``,
``data.timestamp_col``). Each user's interactions are sorted by time (ties keep the file's order); the last item is
the test target, the second-to-last the validation target, the rest the training sequence; users with fewer than
``data.min_interactions`` interactions are dropped and counted in ``split.json`` (:mod:`embreg.data.sequences`).

Training examples (``data.train_examples``):

* ``sequences`` (SASRec, Kang & McAuley 2018, Sec. III): one example per user, the last ``max_len`` training
  items, every position predicting the next item;
* ``prefixes`` (RecBole's SASRec): every prefix of a training sequence is an example predicting its next item
  at its last position only.

Evaluation (:class:`~embreg.tasks.next_item.evaluation.NextItemEvaluator`): full ranking over every item the user
has not interacted with (``ndcg@10``, ``hit@10``, ``mrr``) and the sampled protocol of SASRec and SSE-PT (the
target against 100 negatives the user never interacted with, drawn once with ``data.eval_seed``, the same for every
model): uniform (``sampled_ndcg@10``, ``sampled_hit@10``) and popularity-weighted (``pop_sampled_*``).

Id kinds for index transforms: ``user``, ``item`` (input items, SSE-SE's p_x) and ``label`` (target items, p_y;
sse-stochastic-shared-embeddings.txt, Sec. 4.2, Table 4).

Example:
    >>> from embreg.recipes import load_recipe
    >>> recipe = load_recipe("sasrec", ["data.max_rows=3000"])
    >>> prepared = recipe.adapter.prepare(recipe)
    >>> prepared.split.num_items == recipe.adapter.num_ids(prepared, "label")
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from embreg.batching.batches import TensorBatches
from embreg.data import NegativeSampler
from embreg.data.datasets.movielens import MovieLens100k
from embreg.data.sequences import SequenceSplit, leave_one_out, left_pad, sampled_negatives
from embreg.errors import ConfigError, DataError
from embreg.sse import NeighbourGraph
from embreg.tasks import TaskAdapter, check_max_rows, register_task
from embreg.tasks.data_files import check_fit_to_file, note_dropped, note_fitted, resolve_data_file
from embreg.tasks.next_item.evaluation import NEGATIVE_PREFIXES, NextItemEvaluator
from embreg.tasks.ratings.task import load_interactions, movielens_graph

__all__ = ["SequenceDataConfig", "PreparedSequences", "NextItemTask", "training_examples"]

NEXT_ITEM_KS = (10,)
"""The cut-offs of the next-item metrics (``ndcg@k``, ``hit@k``, in full ranking and both sampled protocols)."""


@dataclass
class SequenceDataConfig:
    """Where the interactions come from, the leave-one-out split and the sequence length.

    Attributes:
        dataset: a registry name (``ml-100k``); ``file`` when ``path`` is set (it replaces the dataset).
        path: a user's own interactions file (CSV/TSV/parquet) with a timestamp column (resolved to an absolute
            path when the recipe is loaded).
        sha256: the checksum ``path`` must have (``null``: filled in with the file's when the recipe is loaded;
            :mod:`embreg.tasks.data_files`).
        user_col, item_col, timestamp_col: column mapping for ``path`` (``timestamp_col`` is required there).
        sep: field separator for text files (``null``: from the extension, else sniffed).
        duplicates: rows of ``path`` with the same user, item *and* timestamp (one item taken again later is not
            a duplicate): ``error`` (refused, naming their lines), ``first`` or ``last`` (the rows hold no value,
            so there is no ``mean``); resolved before the split (:mod:`embreg.data.files.duplicates`).
        max_len: items of history the model sees (the most recent ones). 50 for ML-100k: it holds the whole history
            of 42% of its users (median history 65, mean 106), and attention's cost grows with the square of the
            window: on 2 CPU cores a SASRec step at 200 costs about 7x one at 50. 200 (the SSE paper's and
            SASRec's setting for ML-1M, whose histories are longer: mean 165) is ``--set data.max_len=200``.
        min_interactions: users with fewer interactions are dropped (>= 3: one each for train, valid, test).
        train_examples: ``sequences`` (SASRec) or ``prefixes`` (RecBole), see the module docstring.
        eval_negatives: negatives per user of the sampled protocol (SASRec: 100).
        eval_seed: seed of the sampled negatives (the same for every model and training seed).
        max_rows: keep only the first ``max_rows`` interactions of the file (quick slices).
        fit_to_file: the sizes of :data:`FILE_SIZES` that give way to a user's file too small for them (filled in
            when the recipe is loaded with the sizes the user did not set; :mod:`embreg.tasks.data_files`):
            more ``eval_negatives`` than some user has unseen items become as many as every user has.
    """

    FILE_SIZES: ClassVar[tuple[str, ...]] = ("eval_negatives",)

    dataset: str = "ml-100k"
    path: str | None = None
    sha256: str | None = None
    user_col: str = "user_id"
    item_col: str = "item_id"
    timestamp_col: str | None = None
    sep: str | None = None
    duplicates: Literal["error", "first", "last"] = "error"
    max_len: int = 50
    min_interactions: int = 3
    train_examples: Literal["sequences", "prefixes"] = "sequences"
    eval_negatives: int = 100
    eval_seed: int = 0
    max_rows: int | None = None
    fit_to_file: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.max_len < 1:
            raise ConfigError(f"data.max_len={self.max_len} must be >= 1")
        if self.min_interactions < 3:
            raise ConfigError(
                f"data.min_interactions={self.min_interactions} must be >= 3 (one item each for training, "
                "validation and test)"
            )
        if self.eval_negatives < 1:
            raise ConfigError(f"data.eval_negatives={self.eval_negatives} must be >= 1")
        check_max_rows(self.max_rows)
        resolve_data_file(self)
        check_fit_to_file(self)


@dataclass
class PreparedSequences:
    """The leave-one-out split and the evaluation negatives (drawn once per split seed).

    Attributes:
        split: the per-user sequences and targets.
        negatives: ``{"uniform" | "popularity": (U, eval_negatives)}`` sampled-protocol negatives.
        movielens: the full ML-100k bundle when the recipe uses it (SSE-Graph's graphs), else ``None``.
        source: the data used (``split.json``'s ``data``): the file's path, sha256 and rows, or the dataset.
    """

    split: SequenceSplit
    negatives: dict[str, torch.Tensor]
    movielens: MovieLens100k | None = None
    source: dict[str, Any] = field(default_factory=dict)


def training_examples(split: SequenceSplit, max_len: int, kind: str) -> dict[str, torch.Tensor]:
    """The training examples of ``split`` as tensors (see the module docstring).

    Returns:
        ``sequences``: ``{"user": (N,), "input": (N, max_len), "target": (N, max_len)}`` with N the users whose
        training sequence has at least two items, padded with ``num_items``. ``prefixes``: ``{"user": (N,),
        "input": (N, max_len), "last": (N,)}`` with N the number of predicted items (the target of the last
        position; :func:`expand_last` turns it into ``target``).

    Example:
        >>> from embreg.data import RatingsData
        >>> data = RatingsData.from_labels(np.zeros(5, int), np.arange(5), timestamps=np.arange(5))
        >>> ex = training_examples(leave_one_out(data), max_len=3, kind="sequences")
        >>> ex["input"].tolist(), ex["target"].tolist()
        ([[5, 0, 1]], [[5, 1, 2]])
        >>> ex = training_examples(leave_one_out(data), max_len=3, kind="prefixes")
        >>> ex["input"].tolist(), ex["last"].tolist()
        ([[5, 5, 0], [5, 0, 1]], [1, 2])
    """
    pad = split.num_items
    users, inputs, targets = [], [], []
    if kind == "sequences":
        for user, seq in zip(split.users.tolist(), split.train):
            if len(seq) >= 2:
                users.append(user)
                inputs.append(seq[:-1])
                targets.append(seq[1:])
        return {
            "user": torch.tensor(users, dtype=torch.long),
            "input": left_pad(inputs, max_len, pad),
            "target": left_pad(targets, max_len, pad),
        }
    if kind != "prefixes":
        raise ConfigError(f"data.train_examples={kind!r} must be 'sequences' or 'prefixes'")
    last = []
    for user, seq in zip(split.users.tolist(), split.train):
        for t in range(1, len(seq)):
            users.append(user)
            inputs.append(seq[max(0, t - max_len) : t])
            last.append(int(seq[t]))
    return {
        "user": torch.tensor(users, dtype=torch.long),
        "input": left_pad(inputs, max_len, pad),
        "last": torch.tensor(last, dtype=torch.long),
    }


def _eval_negatives(split: SequenceSplit, n: int, source: dict[str, Any], fits: bool) -> int:
    """The sampled-protocol negatives per user: ``n`` when every user has that many items never interacted with
    among the items seen in training (the popularity protocol draws only those); else, when ``fits``
    (``eval_negatives`` in ``data.fit_to_file``), as many as every user has, noted on stderr and in ``source``.

    Raises:
        DataError: one line naming the file and the ``--set`` that fits, when ``n`` does not fit and may not
            change (or no user has an unseen item).
    """
    trained = np.flatnonzero(split.train_item_counts() > 0)
    unseen = [
        len(np.setdiff1d(trained, np.r_[seq, v, t]))
        for seq, v, t in zip(split.train, split.valid_items, split.test_items)
    ]
    fewest = min(unseen) if unseen else 0
    if fewest >= n:
        return n
    where = source.get("path", source.get("dataset"))
    if fits and fewest >= 1:
        rule = "the sampled protocol draws as many negatives as every user has items never interacted with"
        note_fitted(source, str(where), {"eval_negatives": (n, fewest)}, rule)
        return fewest
    fix = f"--set data.eval_negatives={fewest} fits this data" if fewest >= 1 else "the data has too few items"
    raise DataError(
        f"{where}: data.eval_negatives={n} sampled negatives per user need at least {n} items the user never "
        f"interacted with; of the {len(trained)} item(s) seen in training a user has only {fewest}: {fix}"
    )


def expand_last(last: torch.Tensor, max_len: int, pad: int) -> torch.Tensor:
    """``(B,)`` last-position targets -> ``(B, max_len)`` targets, ``pad`` everywhere else."""
    target = torch.full((last.shape[0], max_len), pad, dtype=torch.long)
    target[:, -1] = last
    return target


class NextItemTask(TaskAdapter):
    """Next-item prediction on per-user sequences; leave-one-out; full-ranking and sampled metrics."""

    name = "next-item"
    data_config = SequenceDataConfig
    default_model = "sasrec"
    id_kinds = ("user", "item", "label")
    smoke_overrides = (
        "data.max_rows=3000",
        "data.max_len=20",
        "data.eval_negatives=20",
        "train.batch_size=8",
        "train.epochs=1",
        "train.progress=false",
    )
    # SASRec (Kang & McAuley 2018, Sec. IV-B): Adam, lr 1e-3, batch 128; the SSE paper's Table 4 adds weight decay
    train_defaults = {"epochs": 200, "batch_size": 128, "lr": 1e-3, "optimizer": "adam", "patience": 20}

    headline = ("test_ndcg@10", "test_hit@10", "test_sampled_ndcg@10", "test_sampled_hit@10")

    def monitor(self, recipe) -> tuple[str, str]:
        return "val_ndcg@10", "max"

    def evaluated_metrics(self, recipe) -> tuple[str, ...]:
        """Full-ranking ``ndcg@k``, ``hit@k``, ``mrr`` and the beyond-accuracy metrics, and both sampled protocols'
        ``ndcg@k``, ``hit@k``."""
        from embreg.metrics.beyond_accuracy import beyond_accuracy_names

        ranked = [
            f"{prefix}{name}@{k}"
            for prefix in ("", *NEGATIVE_PREFIXES.values())
            for k in NEXT_ITEM_KS
            for name in ("ndcg", "hit")
        ]
        return (*ranked, "mrr", *beyond_accuracy_names(NEXT_ITEM_KS))

    def prepare(self, recipe) -> PreparedSequences:
        d = recipe.data
        if d.path is not None and d.timestamp_col is None:
            raise ConfigError(
                "task next-item orders each user's interactions by time: set data.timestamp_col to the "
                f"timestamp column of {d.path}"
            )
        ratings, movielens, source = load_interactions(
            d, rating_col=None, holds="timed interactions", per_timestamp=True
        )
        split = leave_one_out(ratings, min_interactions=d.min_interactions)  # every rating is an interaction
        if len(split.users) == 0:
            raise DataError(
                f"{source.get('path', source.get('dataset'))}: no user among {len(ratings)} interaction row(s) has "
                f"{d.min_interactions}; leave-one-out needs at least one user with data.min_interactions="
                f"{d.min_interactions}"
            )
        if d.path is not None:
            below = f"users with fewer than data.min_interactions={d.min_interactions} interactions"
            note_dropped(source, str(source.get("path")), {below: split.dropped_users})
        counts = split.train_item_counts().astype(np.float64)
        n = _eval_negatives(split, d.eval_negatives, source, "eval_negatives" in d.fit_to_file)
        negatives = {
            "uniform": sampled_negatives(split, n=n, seed=d.eval_seed),
            "popularity": sampled_negatives(split, n=n, seed=d.eval_seed + 1, weights=counts),
        }
        return PreparedSequences(split=split, negatives=negatives, movielens=movielens, source=source)

    def num_ids(self, prepared: PreparedSequences, kind: str) -> int:
        return prepared.split.num_users if kind == "user" else prepared.split.num_items

    def frequencies(self, prepared: PreparedSequences, kind: str) -> np.ndarray:
        split = prepared.split
        if kind == "user":
            counts = np.zeros(split.num_users, np.int64)
            counts[split.users] = [len(seq) for seq in split.train]
            return counts
        return split.train_item_counts()

    def graph(self, prepared: PreparedSequences, kind: str, name: str, relations) -> NeighbourGraph:
        return movielens_graph(
            prepared.movielens, "user" if kind == "user" else "item", name, relations, self.num_ids(prepared, kind)
        )

    def batches(self, recipe, prepared: PreparedSequences) -> TensorBatches:
        split, t, max_len = prepared.split, recipe.train, recipe.data.max_len
        pad = split.num_items
        examples = training_examples(split, max_len, recipe.data.train_examples)
        needs_negatives = getattr(recipe.model.config, "loss", "bce") == "bce"
        sampler = None
        if needs_negatives:
            users = np.repeat(split.users, [len(seq) for seq in split.train])
            items = np.concatenate(split.train) if split.train else np.zeros(0, np.int64)
            sampler = NegativeSampler(users, items, split.num_items, num_users=split.num_users)

        def complete(batch: dict[str, torch.Tensor], generator: torch.Generator) -> dict[str, torch.Tensor]:
            if "last" in batch:
                batch["target"] = expand_last(batch.pop("last"), max_len, pad)
            if sampler is not None:
                target = batch["target"]
                users = batch["user"].unsqueeze(1).expand_as(target).reshape(-1)
                neg = sampler.sample(users, generator).view_as(target)
                batch["neg"] = neg.masked_fill(target == pad, pad)
            return batch

        return TensorBatches(examples, t.batch_size, seed=t.seed, transform=complete)

    def evaluator(self, recipe, prepared: PreparedSequences) -> NextItemEvaluator:
        return NextItemEvaluator(
            prepared.split,
            recipe.data.max_len,
            negatives=prepared.negatives,
            ks=NEXT_ITEM_KS,
            item_counts=prepared.split.train_item_counts(),
        )

    def records(self, recipe, prepared: PreparedSequences) -> dict:
        d = recipe.data
        record = prepared.split.record()
        record.update(
            max_len=d.max_len,
            train_examples=d.train_examples,
            eval_negatives=int(prepared.negatives["uniform"].shape[1]),
            eval_seed=d.eval_seed,
            data=prepared.source,
        )
        return {"split.json": record}

    def data_used(self, recipe, prepared: PreparedSequences) -> dict[str, Any]:
        return prepared.source


register_task(
    NextItemTask(),
    "sequential recommendation: leave-one-out; full-ranking and sampled NDCG/hit@10",
    "sse-stochastic-shared-embeddings.txt, Sec. 4.2 (SASRec)",
)

"""Task ``ctr``: click (binary label) tables with categorical, multi-valued and dense fields; log-loss, accuracy, AUC.

Data: the adult census table, MovieLens-100k as CTR (``ml-100k-ctr``), a SYNTHETIC Criteo-like table
(``synthetic-ctr``, for speed and scale), or a user's own click file (CSV/TSV/parquet, ``data.path``, read by
:func:`embreg.data.load_ctr_file`). Split at random with ``data.split_seed``; dense features standardised
with the training split's statistics.

Example:
    >>> from embreg.recipes import load_recipe
    >>> recipe = load_recipe("ctr-adult", ["data.max_rows=500"])
    >>> prepared = recipe.adapter.prepare(recipe)
    >>> sorted(prepared.tensors("train"))
    ['categorical', 'dense', 'label']
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from embreg.batching.batches import TensorBatches
from embreg.data import CTRData, load_adult, load_ctr_file, load_ml100k_ctr, random_split, synthetic_ctr
from embreg.errors import ConfigError
from embreg.id_kinds import FIELD_KIND, field_kind
from embreg.tasks import TaskAdapter, check_max_rows, check_split, register_task
from embreg.tasks.ctr.evaluation import CTREvaluator
from embreg.tasks.data_files import checked_file, file_record, require_split_rows, resolve_data_file

__all__ = ["CTRDataConfig", "PreparedCTRData", "CTRTask", "load_ctr_dataset", "CTR_DATASETS"]

CTR_DATASETS = ("adult", "ml-100k-ctr", "synthetic-ctr")
SYNTHETIC_EXAMPLES = 200_000
SYNTHETIC_MAX_CARDINALITY = 100_000


def load_ctr_dataset(name: str, synthetic_rows: int = SYNTHETIC_EXAMPLES) -> CTRData:
    """The CTR table called ``name`` (one of :data:`CTR_DATASETS`; ``synthetic-ctr`` is generated, seed 0, with
    ``synthetic_rows`` rows)."""
    if name == "adult":
        return load_adult()
    if name == "ml-100k-ctr":
        return load_ml100k_ctr()
    if name == "synthetic-ctr":
        return synthetic_ctr(synthetic_rows, max_cardinality=SYNTHETIC_MAX_CARDINALITY, seed=0)
    raise ConfigError(f"data.dataset={name!r} is not a CTR dataset; choose one of {CTR_DATASETS}")


@dataclass
class CTRDataConfig:
    """The click table and its split.

    Attributes:
        dataset: ``adult``, ``ml-100k-ctr`` or ``synthetic-ctr``; ``file`` when ``path`` is set (it replaces the
            dataset).
        path: a user's own click file (CSV/TSV/parquet) instead of a registry table (see
            :func:`embreg.data.load_ctr_file`); resolved to an absolute path when the recipe is loaded.
        sha256: the checksum ``path`` must have (``null``: filled in with the file's when the recipe is loaded;
            :mod:`embreg.tasks.data_files`).
        label_col: for ``path``, the column of 0/1 labels (``true``/``false`` accepted).
        categorical_cols: for ``path``, the categorical fields (``null``: every column that is neither the label
            nor dense; a missing value is its own category ``""``).
        dense_cols: for ``path``, the numeric columns (no missing values; standardised like the registry tables').
        sep: for ``path``, the field separator of a text file (``null``: from the extension, else sniffed).
        split: train/valid/test fractions; split_seed: its seed.
        max_rows: keep only the first rows (quick slices).
        synthetic_rows: rows generated for ``synthetic-ctr`` (scale benchmarks use 10^7 and more).
    """

    dataset: Literal["adult", "ml-100k-ctr", "synthetic-ctr", "file"] = "adult"
    path: str | None = None
    sha256: str | None = None
    label_col: str = "label"
    categorical_cols: list[str] | None = None
    dense_cols: list[str] = field(default_factory=list)
    sep: str | None = None
    split: list[float] = field(default_factory=lambda: [0.8, 0.1, 0.1])
    split_seed: int = 0
    max_rows: int | None = None
    synthetic_rows: int = SYNTHETIC_EXAMPLES

    def __post_init__(self) -> None:
        check_split(self.split)
        check_max_rows(self.max_rows)
        if (
            isinstance(self.synthetic_rows, bool)
            or not isinstance(self.synthetic_rows, int)
            or self.synthetic_rows < 10
        ):
            raise ConfigError(f"data.synthetic_rows={self.synthetic_rows!r} must be an integer >= 10")
        resolve_data_file(self)


@dataclass
class PreparedCTRData:
    """A CTR table, its seeded split and the training statistics that standardise the dense features.

    Attributes:
        table: the whole table.
        split: ``{"train"|"valid"|"test": index array}``.
        dense_mean, dense_std: (S,) training mean and standard deviation of each dense feature.
    """

    table: CTRData
    split: dict[str, np.ndarray]
    dense_mean: np.ndarray
    dense_std: np.ndarray
    source: dict[str, Any] = field(default_factory=dict)

    def part(self, name: str) -> CTRData:
        return self.table.subset(self.split[name])

    def tensors(self, name: str) -> dict[str, torch.Tensor]:
        """A split as model inputs: ``categorical`` (N, F), ``dense`` (N, S) standardised, ``label`` (N,)
        and ``bags`` (N, G, L) when the table has multi-valued fields."""
        part = self.part(name)
        dense = (part.dense - self.dense_mean) / self.dense_std
        out = {
            "categorical": torch.from_numpy(part.categorical),
            "dense": torch.from_numpy(dense.astype(np.float32)),
            "label": torch.from_numpy(part.labels),
        }
        if part.bags is not None:
            out["bags"] = torch.from_numpy(part.bags)
        return out


class CTRTask(TaskAdapter):
    """Binary click labels: cross-entropy; log-loss, accuracy and AUC on every split."""

    name = "ctr"
    data_config = CTRDataConfig
    default_model = "dlrm"
    id_kinds = (FIELD_KIND,)
    smoke_overrides = ("data.max_rows=2000", "train.batch_size=256", "train.epochs=1", "train.progress=false")
    train_defaults = {"epochs": 30, "batch_size": 512, "lr": 2e-3, "optimizer": "adam", "patience": 3}
    headline = ("test_logloss", "test_auc", "test_accuracy")

    def monitor(self, recipe) -> tuple[str, str]:
        return "val_logloss", "min"

    def evaluated_metrics(self, recipe) -> tuple[str, ...]:
        return ("logloss", "accuracy", "auc")

    def prepare(self, recipe) -> PreparedCTRData:
        d = recipe.data
        if d.path is not None:
            described = checked_file(d)
            table = load_ctr_file(
                d.path, label_col=d.label_col, categorical_cols=d.categorical_cols, dense_cols=d.dense_cols, sep=d.sep
            )
            source = file_record(described, {"rows_read": len(table)}, len(table))
        else:
            table = load_ctr_dataset(d.dataset, d.synthetic_rows)
            source = {"dataset": d.dataset, "rows_read": len(table)}
        if d.max_rows is not None and d.max_rows < len(table):
            table = table.subset(np.arange(d.max_rows))
        source["rows"] = len(table)
        require_split_rows(len(table), d.split, source)
        split = random_split(len(table), tuple(d.split), seed=d.split_seed)
        train_dense = table.dense[split["train"]].astype(np.float64)
        std = train_dense.std(0)
        return PreparedCTRData(table, split, train_dense.mean(0), np.where(std > 0, std, 1.0), source)

    # -- id kinds: field:<name> is one categorical field, field every one (embreg.id_kinds) ---------------
    def expand_id_kind(self, prepared: PreparedCTRData, kind: str) -> tuple[str, ...]:
        if kind == FIELD_KIND:
            table = prepared.table
            return tuple(field_kind(name) for name in (*table.field_names, *table.bag_names))
        self._field(prepared, kind)  # an unknown field name fails here, before anything trains
        return (kind,)

    def num_ids(self, prepared: PreparedCTRData, kind: str) -> int:
        """The field's value count (a multi-valued field's without its padding id, which no transform draws)."""
        single, index = self._field(prepared, kind)
        table = prepared.table
        return table.cardinalities[index] if single else table.bag_padding(index)

    def frequencies(self, prepared: PreparedCTRData, kind: str) -> np.ndarray:
        """Training counts of the field's values (:meth:`num_ids` of them)."""
        single, index = self._field(prepared, kind)
        counts = prepared.part("train").field_frequencies()
        table = prepared.table
        return counts[index] if single else counts[len(table.field_names) + index][: table.bag_padding(index)]

    def _field(self, prepared: PreparedCTRData, kind: str) -> tuple[bool, int]:
        """``(single-valued, index)`` of the field ``field:<name>``.

        Raises:
            ConfigError: ``kind`` names no field of the table (the message lists them).
        """
        base, _, name = kind.partition(":")
        table = prepared.table
        if base != FIELD_KIND or not name:
            raise ConfigError(f"task 'ctr' has ids of one field at a time: field:<name>, not {kind!r}")
        if name in table.field_names:
            return True, table.field_names.index(name)
        if name in table.bag_names:
            return False, table.bag_names.index(name)
        names = [*table.field_names, *table.bag_names]
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {field_kind(close[0])!r}?" if close else ""
        raise ConfigError(
            f"index_transforms.{kind}: the table {table.name!r} has no field {name!r}{hint} Fields: {', '.join(names)}"
        )

    def batches(self, recipe, prepared: PreparedCTRData) -> TensorBatches:
        return TensorBatches(prepared.tensors("train"), recipe.train.batch_size, seed=recipe.train.seed)

    def evaluator(self, recipe, prepared: PreparedCTRData) -> CTREvaluator:
        return CTREvaluator({name: prepared.tensors(name) for name in ("train", "valid", "test")})

    def records(self, recipe, prepared: PreparedCTRData) -> dict:
        return {
            "split.json": {
                "split_seed": recipe.data.split_seed,
                "fractions": recipe.data.split,
                "kind": "random",
                "sizes": {name: int(idx.size) for name, idx in prepared.split.items()},
                "data": prepared.source,
            }
        }

    def data_used(self, recipe, prepared: PreparedCTRData) -> dict[str, Any]:
        return prepared.source


register_task(
    CTRTask(),
    "click-through rate: binary cross-entropy; log-loss, accuracy, AUC",
    "mixed-dimension-embeddings.txt, Sec. IV (CTR with DLRM)",
)

"""Click-through-rate style tables: categorical fields, multi-valued (bag) fields, dense features and a 0/1 label."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from embreg.errors import DataError

__all__ = ["CTRData", "encode_field"]


def encode_field(values: pd.Series | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes ``0..n-1`` of a column's distinct values (sorted), and the vocabulary.

    Example:
        >>> codes, vocab = encode_field(np.array(["b", "a", "b"], dtype=object))
        >>> codes.tolist(), vocab.tolist()
        ([1, 0, 1], ['a', 'b'])
    """
    codes, vocabulary = pd.factorize(pd.Series(values).astype(str), sort=True)
    return codes.astype(np.int64), np.asarray(vocabulary, dtype=object)


@dataclass(frozen=True)
class CTRData:
    """A CTR table of ``N`` examples.

    Attributes:
        name: where it comes from (synthetic tables say so in their name).
        categorical: (N, F) int64 value ids of the single-valued fields; column ``j`` in ``[0, cardinalities[j])``.
        field_names: F names.
        cardinalities: F value counts (every value of the whole table, seen in training or not).
        dense: (N, S) float32 raw dense features (standardise them with training statistics).
        dense_names: S names.
        labels: (N,) float32 in {0, 1}.
        bags: (N, G, L) int64 ids of multi-valued fields, padded with that field's padding id, or ``None``.
        bag_names: G names.
        bag_cardinalities: G id counts *including* the padding id, which is the last id (``cardinality - 1``).
        synthetic: True for generated data (never a stand-in for real results).

    Example:
        >>> data = CTRData("toy", np.array([[0, 1], [1, 0]]), ("a", "b"), (2, 2), np.zeros((2, 1), np.float32),
        ...                ("x",), np.array([1.0, 0.0], np.float32))
        >>> [f.tolist() for f in data.field_frequencies()]
        [[1, 1], [1, 1]]
    """

    name: str
    categorical: np.ndarray
    field_names: tuple[str, ...]
    cardinalities: tuple[int, ...]
    dense: np.ndarray
    dense_names: tuple[str, ...]
    labels: np.ndarray
    bags: np.ndarray | None = None
    bag_names: tuple[str, ...] = ()
    bag_cardinalities: tuple[int, ...] = ()
    synthetic: bool = False

    def __post_init__(self) -> None:
        n = len(self.labels)
        if self.categorical.ndim != 2 or self.categorical.shape[0] != n:
            raise DataError(f"categorical has shape {self.categorical.shape}; expected ({n}, F)")
        if self.categorical.shape[1] != len(self.field_names) or len(self.field_names) != len(self.cardinalities):
            raise DataError(
                f"{self.categorical.shape[1]} categorical columns, {len(self.field_names)} names and "
                f"{len(self.cardinalities)} cardinalities must agree"
            )
        if self.dense.shape != (n, len(self.dense_names)):
            raise DataError(f"dense has shape {self.dense.shape}; expected ({n}, {len(self.dense_names)})")
        if n and self.categorical.size:
            low, high = self.categorical.min(0), self.categorical.max(0)
            for j, name in enumerate(self.field_names):
                if low[j] < 0 or high[j] >= self.cardinalities[j]:
                    raise DataError(
                        f"field {name!r} has ids in [{low[j]}, {high[j]}]; valid range is "
                        f"[0, {self.cardinalities[j] - 1}]"
                    )
        if self.bags is not None:
            if self.bags.ndim != 3 or self.bags.shape[:2] != (n, len(self.bag_names)):
                raise DataError(f"bags has shape {self.bags.shape}; expected ({n}, {len(self.bag_names)}, L)")
            if len(self.bag_cardinalities) != len(self.bag_names):
                raise DataError("bag_names and bag_cardinalities must have the same length")

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def num_fields(self) -> int:
        """F + G, every embedded field."""
        return len(self.field_names) + len(self.bag_names)

    def bag_padding(self, g: int) -> int:
        """The padding id of bag field ``g`` (its last id)."""
        return self.bag_cardinalities[g] - 1

    def subset(self, index: np.ndarray) -> CTRData:
        """The examples ``index`` (an index array), with the same vocabularies."""
        return replace(
            self,
            categorical=self.categorical[index],
            dense=self.dense[index],
            labels=self.labels[index],
            bags=None if self.bags is None else self.bags[index],
        )

    def field_frequencies(self) -> list[np.ndarray]:
        """Measured query counts of every value: one (cardinality,) vector per single field, then per bag field.

        Padding ids of bag fields count 0 (they are never looked up).
        """
        out = [np.bincount(self.categorical[:, j], minlength=c) for j, c in enumerate(self.cardinalities)]
        if not self.bag_cardinalities:
            return out
        bags = self.bags
        if bags is None:
            raise DataError(f"{len(self.bag_cardinalities)} bag cardinalities but no bags to count")
        for g, c in enumerate(self.bag_cardinalities):
            counts = np.bincount(bags[:, g].reshape(-1), minlength=c)
            counts[self.bag_padding(g)] = 0
            out.append(counts)
        return out

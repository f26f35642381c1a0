"""Original ids <-> the contiguous indices a model was trained on, for one kind of id (users, items, ...).

The data readers number ids by sorted label (:func:`embreg.data.ratings.encode_labels`), and keep integer ids as
integers only when they were written as canonical integers (``"007"`` stays the string ``"007"``). A vocabulary
looks labels up by their text, so an id read back from a file the same way finds its index whatever its dtype.

Example:
    >>> import numpy as np
    >>> vocab = IdVocabulary("user", np.array(["b", "a7", "007"], dtype=object))
    >>> vocab.indices(np.array(["007", "zz", "b"], dtype=object)).tolist()
    [2, -1, 0]
    >>> vocab.labels_of(np.array([1, 0])).tolist()
    ['a7', 'b']
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from embreg.errors import DataError

__all__ = ["IdVocabulary", "UNKNOWN"]

UNKNOWN = -1
"""The index :meth:`IdVocabulary.indices` gives a label that was never seen in training."""


class IdVocabulary:
    """Index -> original label of one id kind, and the reverse lookup.

    Args:
        kind: what the ids are (``"user"``, ``"item"``, ``"label"``, ...), named in errors.
        labels: ``(N,)`` original label of each index ``0..N-1`` (ints or strings).
    """

    def __init__(self, kind: str, labels: np.ndarray | list | tuple) -> None:
        self.kind = kind
        self.labels = np.asarray(labels)
        self._index = pd.Index(_as_text(self.labels))
        # integer ids (ML-100k's, or a file's canonical integers) are also looked up as integers: no text needed
        self._numbers = pd.Index(self.labels) if np.issubdtype(self.labels.dtype, np.integer) else None
        self._arrow: Any = None
        self._first: int | None = None  # ids first..first+N-1 in order (ML-100k's): an index is an offset
        if self._numbers is not None and len(self.labels):
            first = int(self.labels[0])
            if np.array_equal(self.labels, np.arange(first, first + len(self.labels))):
                self._first = first

    def __len__(self) -> int:
        return len(self.labels)

    def arrow_labels(self) -> Any:
        """The labels' text as a ``pyarrow`` string array (made once), for Arrow lookups of string columns."""
        if self._arrow is None:
            import pyarrow as pa

            self._arrow = pa.array(self._index.to_numpy(dtype=object), type=pa.string())
        return self._arrow

    def __repr__(self) -> str:
        return f"IdVocabulary({self.kind!r}, {len(self)} ids)"

    def indices(self, labels: np.ndarray | list | tuple) -> np.ndarray:
        """``(M,)`` int64 index of each label, :data:`UNKNOWN` (-1) for a label never seen in training."""
        values = np.asarray(labels)
        if np.issubdtype(values.dtype, np.integer):
            if self._numbers is None:  # integers never match string labels ("7" would, "007" would not)
                return self._index.get_indexer(_as_text(values)).astype(np.int64)
            if self._first is not None:
                offset = values.astype(np.int64) - self._first
                return np.where((offset >= 0) & (offset < len(self.labels)), offset, UNKNOWN)
            return self._numbers.get_indexer(values).astype(np.int64)
        codes, uniques = pd.factorize(values)  # one hash pass; each distinct label is turned into text once
        found = self._index.get_indexer(_as_text(np.asarray(uniques))).astype(np.int64)
        return np.append(found, UNKNOWN)[codes]  # a missing label (code -1) is unknown

    def require(self, labels: np.ndarray | list | tuple) -> np.ndarray:
        """Like :meth:`indices`, but an unknown label is a :class:`DataError` naming the first few."""
        found = self.indices(labels)
        unknown = found == UNKNOWN
        if unknown.any():
            shown = np.asarray(labels)[unknown][:5].tolist()
            raise DataError(
                f"{int(unknown.sum())} {self.kind} id(s) were never seen in training, e.g. {shown}; the run knows "
                f"{len(self)} {self.kind} ids"
            )
        return found

    def labels_of(self, indices: np.ndarray | list | tuple) -> np.ndarray:
        """The original labels of ``indices`` (each in ``[0, len)``)."""
        return self.labels[np.asarray(indices, dtype=np.int64)]


def _as_text(labels: np.ndarray) -> np.ndarray:
    return labels.astype(str).astype(object)

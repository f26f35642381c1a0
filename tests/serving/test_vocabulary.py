"""IdVocabulary: labels found by their text, integer and contiguous fast paths agree with it."""

from __future__ import annotations

import numpy as np
import pytest

from embreg.errors import DataError
from embreg.serving.vocabulary import UNKNOWN, IdVocabulary


def test_string_labels_keep_leading_zeros_apart() -> None:
    vocab = IdVocabulary("user", np.array(["007", "7a", "b"], dtype=object))
    assert vocab.indices(np.array(["b", "007", "7", "x"], dtype=object)).tolist() == [2, 0, UNKNOWN, UNKNOWN]
    assert vocab.indices(np.array([7])).tolist() == [UNKNOWN]
    assert vocab.labels_of([0, 2]).tolist() == ["007", "b"]


@pytest.mark.parametrize("labels", [np.arange(1, 8), np.array([3, 10, 11, 40])])
def test_integer_labels_by_number_or_text(labels: np.ndarray) -> None:
    vocab = IdVocabulary("item", labels)
    queries = np.array([labels[-1], labels[0] - 1, labels[1], 10**6])
    expected = [len(labels) - 1, UNKNOWN, 1, UNKNOWN]
    assert vocab.indices(queries).tolist() == expected
    assert vocab.indices(queries.astype(str).astype(object)).tolist() == expected


def test_require_names_the_unknown_ids() -> None:
    with pytest.raises(DataError, match=r"1 user id\(s\) were never seen in training, e\.g\. \['zz'\]"):
        IdVocabulary("user", np.array(["a"], dtype=object)).require(["a", "zz"])

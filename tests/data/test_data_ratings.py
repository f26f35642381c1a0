"""RatingsData: label encoding, id spaces kept by subsets, popularity, validation."""

from __future__ import annotations

import numpy as np
import pytest

from embreg.data import RatingsData, encode_labels
from embreg.errors import DataError


def small() -> RatingsData:
    return RatingsData.from_labels(
        np.array(["u2", "u1", "u2", "u3"], dtype=object),
        np.array([30, 10, 10, 20]),
        np.array([1, 2, 3, 4]),
        np.array([5, 6, 7, 8]),
    )


def test_labels_are_numbered_in_sorted_order() -> None:
    data = small()
    assert data.user_ids.tolist() == ["u1", "u2", "u3"] and data.item_ids.tolist() == [10, 20, 30]
    assert data.users.tolist() == [1, 0, 1, 2] and data.items.tolist() == [2, 0, 0, 1]
    assert data.users.dtype == np.int64 and data.ratings.dtype == np.float32 and data.timestamps.dtype == np.int64
    assert (len(data), data.num_users, data.num_items) == (4, 3, 3)


def test_subset_keeps_the_id_spaces() -> None:
    data = small()
    part = data.subset(np.array([0, 2]))
    assert part.users.tolist() == [1, 1] and part.timestamps.tolist() == [5, 7]
    assert (part.num_users, part.num_items) == (3, 3)
    masked = data.subset(data.ratings > 2)
    assert masked.ratings.tolist() == [3.0, 4.0]
    assert len(data.subset(np.array([]))) == 0


def test_popularity_counts_every_index() -> None:
    data = small()
    assert data.item_popularity().tolist() == [2, 1, 1]
    assert data.user_popularity().tolist() == [1, 2, 1]


def test_encode_labels_with_vocabulary_rejects_unknown() -> None:
    codes, vocab = encode_labels(np.array([3, 1]), np.array([1, 2, 3]))
    assert codes.tolist() == [2, 0] and vocab.tolist() == [1, 2, 3]
    with pytest.raises(DataError, match=r"1 labels are not in the vocabulary of 3, e.g. \[9\]"):
        encode_labels(np.array([9, 1]), np.array([1, 2, 3]))


def test_inconsistent_arrays_are_rejected() -> None:
    ids = np.array([0, 1])
    with pytest.raises(DataError, match="same length"):
        RatingsData(np.array([0, 1]), np.array([0]), np.ones(2, np.float32), None, ids, ids)
    with pytest.raises(DataError, match=r"valid range is \[0, 2\)"):
        RatingsData(np.array([0, 2]), np.array([0, 1]), np.ones(2, np.float32), None, ids, ids)
    with pytest.raises(DataError, match="float32"):
        RatingsData(np.array([0, 1]), np.array([0, 1]), np.ones(2), None, ids, ids)
    with pytest.raises(DataError, match="boolean mask has shape"):
        small().subset(np.array([True, False]))

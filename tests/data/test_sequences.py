"""Leave-one-out sequence splits, left padding and sampled negatives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embreg.data import RatingsData, SequenceSplit, leave_one_out, left_pad, sampled_negatives
from embreg.errors import DataError


def frame() -> RatingsData:
    """Users a (5 rows, a time tie), b (2 rows: dropped), c (3 rows, given out of time order); item labels = ids."""
    users = np.array(["a", "c", "a", "b", "a", "c", "a", "b", "c", "a"], dtype=object)
    items = np.array([0, 5, 1, 2, 3, 6, 4, 3, 7, 2])
    stamps = np.array([10, 30, 20, 5, 20, 10, 40, 6, 20, 5])
    return RatingsData.from_labels(users, items, timestamps=stamps, item_ids=np.arange(9))


def test_leave_one_out_exact_split() -> None:
    split = leave_one_out(frame())
    # a: (t5, 2) (t10, 0) (t20, 1) (t20, 3) (t40, 4): the tie at t20 keeps file order 1 then 3
    # c: (t10, 6) (t20, 7) (t30, 5)
    assert split.users.tolist() == [0, 2] and split.users.dtype == np.int64
    assert [seq.tolist() for seq in split.train] == [[2, 0, 1], [6]]
    assert split.valid_items.tolist() == [3, 7]
    assert split.test_items.tolist() == [4, 5]
    assert (split.num_users, split.num_items) == (3, 9)
    assert split.dropped_users == 1 and split.min_interactions == 3
    assert [h.tolist() for h in split.history("valid")] == [[2, 0, 1], [6]]
    assert [h.tolist() for h in split.history("test")] == [[2, 0, 1, 3], [6, 7]]
    assert split.targets("valid").tolist() == [3, 7] and split.targets("test").tolist() == [4, 5]


def test_leave_one_out_min_interactions_and_record() -> None:
    split = leave_one_out(frame(), min_interactions=4)
    assert split.users.tolist() == [0] and split.dropped_users == 2
    record = split.record()
    assert record["kind"] == "leave-one-out"
    assert record["kept_users"] == 1 and record["dropped_users"] == 2 and record["min_interactions"] == 4
    assert record["interactions"] == {"train": 3, "valid": 1, "test": 1}


def test_train_item_counts() -> None:
    counts = leave_one_out(frame()).train_item_counts()
    assert counts.dtype == np.int64 and counts.shape == (9,)
    assert counts.tolist() == [1, 1, 1, 0, 0, 0, 1, 0, 0]


def test_leave_one_out_errors() -> None:
    data = frame()
    no_time = RatingsData(data.users, data.items, data.ratings, None, data.user_ids, data.item_ids)
    with pytest.raises(DataError, match="timestamp_col"):
        leave_one_out(no_time)
    with pytest.raises(DataError, match="min_interactions"):
        leave_one_out(data, min_interactions=2)
    with pytest.raises(DataError, match="split"):
        leave_one_out(data).history("train")


def test_left_pad() -> None:
    out = left_pad([np.array([1, 2, 3, 4]), np.array([5]), np.array([], dtype=np.int64)], max_len=3, pad=9)
    assert out.dtype == torch.int64
    assert out.tolist() == [[2, 3, 4], [9, 9, 5], [9, 9, 9]]
    assert left_pad([], max_len=2, pad=0).shape == (0, 2)
    with pytest.raises(DataError, match="max_len"):
        left_pad([np.array([1])], max_len=0, pad=9)


def random_split(num_users: int = 60, num_items: int = 50, seed: int = 0) -> SequenceSplit:
    rng = np.random.default_rng(seed)
    users, items = [], []
    for u in range(num_users):
        k = int(rng.integers(3, 30))
        users.append(np.full(k, u))
        items.append(rng.choice(num_items, size=k, replace=True))
    u_all, i_all = np.concatenate(users), np.concatenate(items)
    data = RatingsData.from_labels(
        u_all, i_all, timestamps=np.arange(len(u_all)), user_ids=np.arange(num_users), item_ids=np.arange(num_items)
    )
    return leave_one_out(data)


def seen_sets(split: SequenceSplit) -> list[set[int]]:
    return [set(h.tolist()) | {int(t)} for h, t in zip(split.history("test"), split.test_items)]


def test_negatives_never_seen_distinct_and_seeded() -> None:
    split = random_split()
    negs = sampled_negatives(split, n=20, seed=3)
    assert negs.shape == (len(split), 20) and negs.dtype == torch.int64
    for row, seen in zip(negs.tolist(), seen_sets(split)):
        assert len(set(row)) == 20 and not set(row) & seen
        assert all(0 <= i < split.num_items for i in row)
    assert torch.equal(negs, sampled_negatives(split, n=20, seed=3))
    assert not torch.equal(negs, sampled_negatives(split, n=20, seed=4))


def test_negatives_when_eligible_items_are_scarce() -> None:
    # n equals the number of eligible items for some users: they need the exact fallback
    split = random_split(num_users=30, num_items=30, seed=1)
    n = int(min(split.num_items - len(s) for s in seen_sets(split)))
    negs = sampled_negatives(split, n=n, seed=0)
    for row, seen in zip(negs.tolist(), seen_sets(split)):
        assert len(set(row)) == n and not set(row) & seen


def test_popularity_weights_respected() -> None:
    split = random_split(num_users=200, num_items=50)
    weights = np.zeros(50)
    weights[:40] = 1.0
    weights[:5] = 20.0  # items 0..4 are 20 times as likely as 5..39; 40..49 never drawn
    negs = sampled_negatives(split, n=5, seed=0, weights=weights)
    assert int(negs.max()) < 40
    counts = np.bincount(negs.reshape(-1).numpy(), minlength=50)
    heavy, light = counts[:5].mean(), counts[5:40].mean()
    assert heavy > 3 * light
    for row, seen in zip(negs.tolist(), seen_sets(split)):
        assert len(set(row)) == 5 and not set(row) & seen


def test_negatives_errors() -> None:
    split = random_split()
    with pytest.raises(DataError, match="user"):
        sampled_negatives(split, n=split.num_items, seed=0)
    weights = np.zeros(split.num_items)
    weights[:3] = 1.0
    with pytest.raises(DataError, match="user"):
        sampled_negatives(split, n=5, seed=0, weights=weights)
    with pytest.raises(DataError, match="shape"):
        sampled_negatives(split, n=5, seed=0, weights=np.ones(3))
    with pytest.raises(DataError, match="non-negative"):
        sampled_negatives(split, n=5, seed=0, weights=-np.ones(split.num_items))
    with pytest.raises(DataError, match="all zero"):
        sampled_negatives(split, n=5, seed=0, weights=np.zeros(split.num_items))
    with pytest.raises(DataError, match="seed"):
        sampled_negatives(split, n=5, seed=-1)
    with pytest.raises(DataError, match="n="):
        sampled_negatives(split, n=0, seed=0)


def test_negatives_at_movielens_scale_are_unseen_and_distinct() -> None:
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(943), 106)
    items = np.concatenate([rng.choice(1682, size=106, replace=False) for _ in range(943)])
    data = RatingsData.from_labels(users, items, timestamps=np.arange(len(users)), item_ids=np.arange(1682))
    split = leave_one_out(data)
    for weights in (None, split.train_item_counts() + 0.0):
        negatives = sampled_negatives(split, n=100, seed=0, weights=weights).numpy()
        seen = items.reshape(943, 106)
        assert all(len(set(row)) == 100 for row in negatives)
        assert not any(set(row) & set(s) for row, s in zip(negatives, seen))

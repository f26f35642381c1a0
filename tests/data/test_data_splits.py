"""Seeded splits: disjoint, covering, reproducible, sized as documented."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from embreg.data import load_split, per_user_split, random_split, save_split
from embreg.errors import DataError

NAMES = ("train", "valid", "test")


def assert_partition(split: dict[str, np.ndarray], n: int) -> None:
    assert set(split) == set(NAMES)
    joined = np.concatenate([split[name] for name in NAMES])
    assert len(joined) == n
    assert np.array_equal(np.sort(joined), np.arange(n))
    for name in NAMES:
        assert split[name].dtype == np.int64 and np.all(np.diff(split[name]) > 0)


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_random_split_partitions(n: int) -> None:
    assert_partition(random_split(n, seed=3), n)


def test_random_split_sizes_follow_fractions() -> None:
    split = random_split(1003, (0.7, 0.2, 0.1), seed=0)
    assert [len(split[k]) for k in NAMES] == [702, 201, 100]


def test_random_split_is_seeded() -> None:
    a, b, c = random_split(500, seed=1), random_split(500, seed=1), random_split(500, seed=2)
    assert all(np.array_equal(a[k], b[k]) for k in NAMES)
    assert not np.array_equal(a["test"], c["test"])


@pytest.mark.parametrize("fractions", [(0.8, 0.2), (0.8, 0.2, 0.0), (0.5, 0.3, 0.3), (1.2, -0.1, -0.1)])
def test_bad_fractions_are_rejected(fractions: tuple[float, ...]) -> None:
    with pytest.raises(DataError, match="fractions"):
        random_split(10, fractions, seed=0)
    with pytest.raises(DataError, match="fractions"):
        per_user_split(np.zeros(10, np.int64), fractions, seed=0)


def test_bad_seed_and_n_are_rejected() -> None:
    with pytest.raises(DataError, match="seed"):
        random_split(10, seed=-1)
    with pytest.raises(DataError, match="n="):
        random_split(-3, seed=0)


def test_per_user_split_partitions_and_rounds_as_documented() -> None:
    counts = {0: 1, 1: 2, 2: 3, 3: 10, 4: 15, 5: 40}
    users = np.repeat(np.array(list(counts)), list(counts.values()))
    np.random.default_rng(0).shuffle(users)
    split = per_user_split(users, seed=5)
    assert_partition(split, len(users))
    expected = {0: (1, 0, 0), 1: (2, 0, 0), 2: (1, 1, 1), 3: (8, 1, 1), 4: (13, 1, 1), 5: (32, 4, 4)}
    for user, sizes in expected.items():
        got = tuple(int(np.sum(users[split[name]] == user)) for name in NAMES)
        assert got == sizes, (user, got)


def test_per_user_split_keeps_train_nonempty_for_large_held_out_fractions() -> None:
    users = np.repeat(np.arange(4), [3, 4, 5, 9])
    split = per_user_split(users, (0.1, 0.45, 0.45), seed=0)
    for user in range(4):
        sizes = [int(np.sum(users[split[name]] == user)) for name in NAMES]
        assert min(sizes) >= 1 and sum(sizes) == np.sum(users == user)


def test_per_user_split_is_seeded() -> None:
    users = np.random.default_rng(1).integers(0, 30, 2000)
    a, b, c = per_user_split(users, seed=9), per_user_split(users, seed=9), per_user_split(users, seed=10)
    assert all(np.array_equal(a[k], b[k]) for k in NAMES)
    assert not np.array_equal(a["valid"], c["valid"])


def test_save_and_load_split_roundtrip(tmp_path: Path) -> None:
    split = random_split(50, seed=4)
    loaded = load_split(save_split(split, tmp_path / "split.npz"))
    assert all(np.array_equal(split[k], loaded[k]) for k in NAMES)

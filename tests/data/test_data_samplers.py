"""NegativeSampler: never a positive, uniform over the negatives, shape- and seed-preserving."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embreg.data import NegativeSampler
from embreg.errors import DataError


def random_interactions(num_users: int = 40, num_items: int = 60, n: int = 900) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.integers(0, num_users, n), rng.integers(0, num_items, n)


def test_never_returns_a_positive() -> None:
    users, items = random_interactions()
    sampler = NegativeSampler(users, items, num_items=60)
    queries = torch.randint(0, 40, (200_000,), generator=torch.Generator().manual_seed(1))
    negatives = sampler.sample(queries, torch.Generator().manual_seed(2))
    positives = set(zip(users.tolist(), items.tolist()))
    pairs = set(zip(queries.tolist(), negatives.tolist()))
    assert negatives.min() >= 0 and negatives.max() < 60
    assert not pairs & positives


def test_uniform_over_the_negatives() -> None:
    # user 0 has positives {1, 4, 5, 9}; the 6 others should each get ~1/6 of the draws.
    sampler = NegativeSampler(np.array([0, 0, 0, 0, 1]), np.array([9, 1, 5, 4, 0]), num_items=10)
    draws = sampler.sample(torch.zeros(60_000, dtype=torch.int64), torch.Generator().manual_seed(0))
    frequencies = torch.bincount(draws, minlength=10).double() / 60_000
    negatives = [0, 2, 3, 6, 7, 8]
    assert frequencies[[1, 4, 5, 9]].sum() == 0
    assert torch.allclose(frequencies[negatives], torch.full((6,), 1 / 6, dtype=torch.float64), atol=0.01)


def test_shape_dtype_and_seed_are_kept() -> None:
    users, items = random_interactions()
    sampler = NegativeSampler(users, items, num_items=60)
    query = torch.randint(0, 40, (8, 5), generator=torch.Generator().manual_seed(0))
    a = sampler.sample(query, torch.Generator().manual_seed(7))
    b = sampler.sample(query, torch.Generator().manual_seed(7))
    assert a.shape == (8, 5) and a.dtype == torch.int64 and torch.equal(a, b)
    assert sampler.sample(torch.empty(0, dtype=torch.int64), torch.Generator()).shape == (0,)


def test_users_without_interactions_sample_every_item() -> None:
    sampler = NegativeSampler(np.array([0]), np.array([0]), num_items=5, num_users=3)
    draws = sampler.sample(torch.full((5000,), 2, dtype=torch.int64), torch.Generator().manual_seed(0))
    assert sorted(torch.unique(draws).tolist()) == [0, 1, 2, 3, 4]
    assert sampler.num_negatives(torch.tensor([0, 2])).tolist() == [4, 5]


def test_a_user_with_every_item_is_rejected() -> None:
    with pytest.raises(DataError, match="user 1 has interacted with all 3 items"):
        NegativeSampler(np.array([0, 1, 1, 1, 1]), np.array([0, 0, 1, 2, 2]), num_items=3)


def test_bad_input_is_rejected() -> None:
    sampler = NegativeSampler(np.array([0, 1]), np.array([0, 1]), num_items=3)
    with pytest.raises(DataError, match=r"valid range is \[0, 2\)"):
        sampler.sample(torch.tensor([2]), torch.Generator())
    with pytest.raises(DataError, match="int64"):
        sampler.sample(torch.tensor([0], dtype=torch.int32), torch.Generator())
    with pytest.raises(DataError, match=r"items span \[0, 3\]"):
        NegativeSampler(np.array([0, 1]), np.array([0, 3]), num_items=3)

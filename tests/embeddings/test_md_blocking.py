"""Equipartition blocking (Alg. 3) and per-feature blocking."""

import pytest
import torch

from embreg.embeddings import equipartition_blocks, feature_blocks
from embreg.errors import EmbregError


@pytest.mark.parametrize("k", [1, 2, 3, 8, 16])
def test_equipartition_blocks_have_equal_mass_within_one_row(k):
    g = torch.Generator().manual_seed(k)
    freq = torch.distributions.Pareto(1.0, 1.2).sample((2000,)).floor()  # heavy-tailed counts, many ties
    freq[torch.randperm(2000, generator=g)[:100]] = 0
    b = equipartition_blocks(freq, k)
    sorted_freq = freq[b.permutation]
    total = float(freq.sum())
    for i, (start, stop) in enumerate(zip(b.offsets, b.offsets[1:])):
        mass = float(sorted_freq[start:stop].sum())
        assert abs(mass - total / k) <= float(freq.max()), (i, mass, total / k)
        assert b.mass[i] == pytest.approx(mass / total)
        assert b.popularity[i] == pytest.approx(mass / total / (stop - start))
    assert sum(b.rows) == 2000 and b.num_blocks == k


def test_equipartition_exact_when_achievable():
    b = equipartition_blocks([1, 1, 2, 4, 1, 1, 2], 3)  # total 12: blocks {4}, {2, 2}, {1, 1, 1, 1}
    assert b.offsets == (0, 1, 3, 7)
    assert b.mass == pytest.approx((1 / 3, 1 / 3, 1 / 3))


def test_rows_are_sorted_by_frequency_and_permutation_round_trips():
    freq = torch.tensor([3.0, 9.0, 0.0, 9.0, 1.0, 5.0])
    b = equipartition_blocks(freq, 2)
    assert b.permutation.tolist() == [1, 3, 5, 0, 4, 2]  # descending, ties by id
    ids = torch.arange(6)
    positions = b.to_positions(ids)
    assert torch.equal(b.to_ids(positions), ids)
    assert torch.equal(b.to_positions(b.to_ids(ids)), ids)
    assert (freq[b.permutation].diff() <= 0).all()
    assert b.offsets == (0, 1, 6)  # masses 9 and 18 are equally far from 13.5: the earlier cut wins
    assert b.block_of(torch.tensor([1, 3, 2])).tolist() == [0, 1, 1]


def test_dominant_row_still_gives_nonempty_blocks():
    b = equipartition_blocks([100.0, 1, 1, 1], 3)
    assert b.rows == (1, 1, 2)


def test_more_blocks_than_rows_is_named():
    with pytest.raises(EmbregError, match=r"num_blocks=5 is outside the valid range \[1, 4\]"):
        equipartition_blocks([1, 2, 3, 4], 5)


@pytest.mark.parametrize(
    "freq, match",
    [
        ([1.0, -2.0], "negative value -2"),
        ([0.0, 0.0], "sum to 0"),
        ([[1.0, 2.0]], "1-d"),
        ([1.0, float("nan")], "non-finite"),
    ],
)
def test_bad_frequencies_are_named(freq, match):
    with pytest.raises(EmbregError, match=match):
        equipartition_blocks(freq, 1)


def test_feature_blocks_use_measured_frequencies():
    # two single-valued features over 8 examples and one multi-hot feature with 16 queries
    b = feature_blocks([torch.tensor([6.0, 2.0]), torch.tensor([2.0, 2, 2, 2]), torch.tensor([16.0, 0.0])])
    assert b.offsets == (0, 2, 6, 8) and b.permutation is None
    assert b.mass == pytest.approx((8 / 32, 8 / 32, 16 / 32))
    assert b.popularity == pytest.approx((8 / 32 / 2, 8 / 32 / 4, 16 / 32 / 2))
    assert torch.equal(b.to_positions(torch.tensor([5])), torch.tensor([5]))

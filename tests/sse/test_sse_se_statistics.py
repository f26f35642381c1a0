"""SSE-SE (eq. 5): swap rate p, never a swap to itself, replacements uniform over the others."""

from __future__ import annotations

import math

import torch
from scipy import stats

from embreg.sse import SSE
from embreg.sse import functional as F
from tests.helpers.sse_helpers import empirical_transitions, row_total_variation, se_matrix


def test_swapped_ids_never_map_to_themselves() -> None:
    ids = torch.randint(0, 7, (100_000,), generator=torch.Generator().manual_seed(0))
    out = F.sse_se(ids, 7, p=1.0, generator=torch.Generator().manual_seed(1))
    assert not (out == ids).any()


def test_two_ids_always_swap_to_the_other() -> None:
    ids = torch.tensor([0, 1, 1, 0, 1])
    assert torch.equal(F.sse_se(ids, 2, p=1.0, generator=torch.Generator().manual_seed(0)), 1 - ids)


def test_swap_rate_matches_p() -> None:
    n, p = 1_000_000, 0.1
    ids = torch.randint(0, 1000, (n,), generator=torch.Generator().manual_seed(0))
    out = SSE(1000, p=p, seed=3)(ids)
    rate = (out != ids).double().mean().item()
    # every swap changes the id, so the change rate estimates p; 5 standard errors
    assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_replacements_are_uniform_over_the_other_ids() -> None:
    num_ids, per_row = 10, 100_000
    ids = torch.arange(num_ids).repeat(per_row)
    out = F.sse_se(ids, num_ids, p=1.0, generator=torch.Generator().manual_seed(5))
    counts = torch.bincount(ids * num_ids + out, minlength=num_ids**2).view(num_ids, num_ids)
    assert int(counts.diagonal().sum()) == 0
    off_diagonal = counts[~torch.eye(num_ids, dtype=torch.bool)].view(num_ids, num_ids - 1)
    for row in off_diagonal:
        assert stats.chisquare(row.numpy()).pvalue > 1e-4


def test_empirical_law_matches_eq5_within_total_variation() -> None:
    num_ids, per_row, p = 8, 200_000, 0.3
    ids = torch.arange(num_ids).repeat(per_row)
    out = F.sse_se(ids, num_ids, p=p, generator=torch.Generator().manual_seed(7))
    tv = row_total_variation(empirical_transitions(ids, out, num_ids), se_matrix(num_ids, p))
    assert float(tv.max()) < 0.01

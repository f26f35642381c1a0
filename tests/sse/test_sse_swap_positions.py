"""Swap decisions form an i.i.d. Bernoulli(p) sequence on both paths (geometric gaps, one uniform per id)."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from embreg.sse import functional as F


def _swap_mask(n: int, p: float, generator: torch.Generator) -> torch.Tensor:
    positions = F._swap_positions(torch.zeros(n, dtype=torch.long), p, generator)
    mask = torch.zeros(n, dtype=torch.bool)
    mask[positions] = True
    assert positions.numel() == int(mask.sum())  # no position twice
    assert bool((positions[1:] > positions[:-1]).all())
    return mask


@pytest.mark.parametrize("p", [0.001, 0.05, 0.3, 0.7])  # 0.7 takes the one-uniform-per-id path
def test_swap_rate_is_p(p: float) -> None:
    n = 1_000_000
    rate = _swap_mask(n, p, torch.Generator().manual_seed(0)).double().mean().item()
    assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("p", [0.05, 0.7])
def test_block_counts_are_binomial(p: float) -> None:
    block = 40
    counts = _swap_mask(block * 20_000, p, torch.Generator().manual_seed(1)).view(-1, block).sum(1)
    observed = torch.bincount(counts, minlength=block + 1).double()
    expected = torch.tensor(stats.binom.pmf(range(block + 1), block, p)) * counts.numel()
    keep = expected > 5  # pool the sparse tails for a valid chi-square test
    observed = torch.cat([observed[keep], observed[~keep].sum().view(1)])
    expected = torch.cat([expected[keep], expected[~keep].sum().view(1)])
    assert stats.chisquare(observed.numpy(), expected.numpy()).pvalue > 1e-4


def test_short_tensors_have_every_pattern_with_the_right_frequency() -> None:
    # position 2 of a 3-long tensor depends on gaps running past the end being cut off correctly
    p, calls = 0.2, 8_000
    generator = torch.Generator().manual_seed(2)
    patterns = torch.stack([_swap_mask(3, p, generator) for _ in range(calls)]).long()
    codes = patterns[:, 0] * 4 + patterns[:, 1] * 2 + patterns[:, 2]
    observed = torch.bincount(codes, minlength=8).numpy()
    expected = [calls * math.prod(p if (code >> bit) & 1 else 1 - p for bit in range(3)) for code in range(8)]
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_top_up_batches_keep_the_law(monkeypatch: pytest.MonkeyPatch) -> None:
    # too few gaps per batch forces the sampler through several top-up batches
    monkeypatch.setattr(F, "_GAP_BATCH_SLACK_SD", -3.0)
    n, p = 200_000, 0.02
    mask = _swap_mask(n, p, torch.Generator().manual_seed(3))
    rate = mask.double().mean().item()
    assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / n)
    halves = mask.view(2, -1).double().mean(1)
    assert abs(float(halves[0] - halves[1])) < 7 * math.sqrt(2 * p * (1 - p) / (n / 2))

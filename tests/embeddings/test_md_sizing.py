"""Power-law sizing (mixed-dimension-embeddings.txt, Alg. 1) on hand-computed cases, rounding and bad input."""

import math

import pytest
import torch

from embreg.embeddings import md_parameter_count, power_law_dims, power_law_sizes, round_dims
from embreg.errors import EmbregError


def test_alg1_from_base_dim_matches_hand_computation():
    # lambda = 64 * 0.5^-0.5; d = lambda * p^0.5  ->  64, 64 * sqrt(0.2), 64 * sqrt(0.02)
    sizes = power_law_sizes([0.5, 0.1, 0.01], alpha=0.5, base_dim=64)
    expected = [64.0, 64 * math.sqrt(0.2), 64 * math.sqrt(0.02)]
    assert sizes.tolist() == pytest.approx(expected, rel=1e-12)
    assert power_law_dims([0.5, 0.1, 0.01], alpha=0.5, base_dim=64) == [64, 29, 9]


def test_alpha_one_is_proportional_to_popularity():
    assert power_law_sizes([0.4, 0.2, 0.1], alpha=1.0, base_dim=40).tolist() == pytest.approx([40, 20, 10])


@pytest.mark.parametrize("kwargs", [dict(base_dim=48), dict(budget=48 * 111, rows=[1, 10, 100])])
def test_alpha_zero_gives_uniform_dims(kwargs):
    assert power_law_dims([0.9, 0.09, 0.001], alpha=0.0, **kwargs) == [48, 48, 48]


def test_budget_closed_form_when_no_bound_is_active():
    p, rows, alpha, budget = [0.3, 0.02, 0.001], [2, 30, 600], 0.4, 5000.0
    lam = budget / sum(n * q**alpha for n, q in zip(rows, p))  # the paper's budget scaling
    sizes = power_law_sizes(p, alpha, budget=budget, rows=rows, min_dim=1)
    assert sizes.tolist() == pytest.approx([lam * q**alpha for q in p], rel=1e-9)
    assert float((torch.tensor(rows, dtype=torch.float64) * sizes).sum()) == pytest.approx(budget, rel=1e-9)


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.3, 0.5, 1.0])
def test_budget_is_met_to_within_rounding(alpha):
    g = torch.Generator().manual_seed(int(alpha * 10))
    rows = torch.randint(1, 500, (12,), generator=g).tolist()
    p = torch.rand(12, generator=g).tolist()
    budget = 16.0 * sum(rows)
    dims = power_law_dims(p, alpha, budget=budget, rows=rows, base_dim=128)
    spent = sum(n * d for n, d in zip(rows, dims))
    assert abs(spent - budget) <= 0.5 * sum(rows)
    assert all(1 <= d <= 128 for d in dims)


def test_budget_respects_bounds_and_redistributes():
    # the popular block would get far more than 8 without the cap; the rest of the budget goes to the others
    sizes = power_law_sizes([1.0, 1e-4], alpha=1.0, budget=10 * 8 + 100 * 4, rows=[10, 100], base_dim=8)
    assert sizes.tolist() == pytest.approx([8.0, 4.0])
    sizes = power_law_sizes([1.0, 1e-6], alpha=1.0, budget=1000, rows=[10, 100], min_dim=2)
    assert sizes[1].item() == pytest.approx(2.0) and sizes[0].item() == pytest.approx(80.0)


def test_rounding_gives_powers_of_two():
    dims = power_law_dims([0.5, 0.2, 0.05, 0.01, 0.001], alpha=0.5, base_dim=64, round_pow2=True)
    assert all(d & (d - 1) == 0 for d in dims)
    assert dims == [64, 32, 16, 8, 4]  # 64, 40.5, 20.2, 9.05, 2.86 rounded in log2 space
    assert round_dims(torch.tensor([2.9, 3.0, 0.4]), round_pow2=True) == [4, 4, 1]


def test_min_dim_floor():
    assert power_law_dims([1.0, 1e-9], alpha=1.0, base_dim=32, min_dim=4) == [32, 4]


def test_parameter_count_counts_projections_except_identity():
    assert md_parameter_count([10, 100], [8, 2], base_dim=8) == 10 * 8 + 100 * 2 + 2 * 8


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_alpha_outside_unit_interval_is_named(alpha):
    with pytest.raises(EmbregError, match=r"alpha=.*\[0, 1\]"):
        power_law_dims([0.5, 0.5], alpha, base_dim=8)


@pytest.mark.parametrize("budget", [0, -100, float("inf")])
def test_bad_budget_is_named(budget):
    with pytest.raises(EmbregError, match=r"budget=.*> 0"):
        power_law_dims([0.5, 0.5], 0.2, budget=budget, rows=[5, 5])


def test_infeasible_budget_names_the_valid_range():
    with pytest.raises(EmbregError, match=r"budget=5 is outside the valid range \[10, 80\]"):
        power_law_dims([0.5, 0.5], 0.2, budget=5, rows=[5, 5], base_dim=8)


def test_missing_rows_or_scale_and_bad_popularity():
    with pytest.raises(EmbregError, match="needs rows"):
        power_law_dims([0.5, 0.5], 0.2, budget=10)
    with pytest.raises(EmbregError, match="base_dim .* or budget"):
        power_law_dims([0.5, 0.5], 0.2)
    with pytest.raises(EmbregError, match="negative value -0.1"):
        power_law_dims([0.5, -0.1], 0.2, base_dim=8)
    with pytest.raises(EmbregError, match="min_dim=9 is outside"):
        power_law_dims([0.5, 0.1], 0.2, base_dim=8, min_dim=9)

"""The Triton SSE-SE sampler's kernel code, run on CPU tensors by Triton's interpreter (``TRITON_INTERPRET=1``).

The kernel is the one CUDA ids take (embreg.sse._cuda_sampler); here its law (SSE, eq. 5), its label variant
(keep value, excluded padding class) and its determinism in (seed, offset) are checked without a GPU. All calls
run in one child process (tests/helpers/interpreted_sse.py). Skipped where Triton is not installed (it comes
with PyTorch's CUDA builds); tests/gpu runs the same kernel on CUDA.
"""

from __future__ import annotations

import math

import pytest
import torch

from embreg.sse import _cuda_sampler as sampler
from tests.helpers.interpreted_sse import run_interpreted
from tests.helpers.sse_helpers import empirical_transitions, row_total_variation, se_matrix

pytest.importorskip("triton")

LAW_IDS = torch.arange(6).repeat(10_000)
RATE_IDS = torch.randint(0, 1000, (40_000,), generator=torch.Generator().manual_seed(0))
REPEAT_IDS = torch.randint(0, 50, (4, 500), generator=torch.Generator().manual_seed(1))
LABELS = torch.arange(6).repeat(8_000)
NARROW_LABELS = torch.tensor([[-100, 2, 3], [4, -100, 0]], dtype=torch.int32).repeat(500, 1)

CALLS = {
    "law": dict(ids=LAW_IDS, num_embeddings=6, p=0.3, seed=2**40 + 3, offset=8),
    "all": dict(ids=LAW_IDS, num_embeddings=6, p=1.0, seed=5, offset=0),
    "none": dict(ids=LAW_IDS, num_embeddings=6, p=0.0, seed=5, offset=0),
    "rate": dict(ids=RATE_IDS, num_embeddings=1000, p=0.05, seed=11, offset=2**33 + 4),  # a counter past 32 bits
    "repeat_a": dict(ids=REPEAT_IDS, num_embeddings=50, p=0.5, seed=9, offset=4),
    "repeat_b": dict(ids=REPEAT_IDS, num_embeddings=50, p=0.5, seed=9, offset=4),
    "next_offset": dict(ids=REPEAT_IDS, num_embeddings=50, p=0.5, seed=9, offset=8),
    "next_seed": dict(ids=REPEAT_IDS, num_embeddings=50, p=0.5, seed=10, offset=4),
    "padding": dict(ids=LABELS, num_embeddings=6, p=1.0, seed=3, offset=0, keep_value=0, excluded=0),
    "narrow": dict(ids=NARROW_LABELS, num_embeddings=5, p=1.0, seed=7, offset=0, keep_value=-100),
}


@pytest.fixture(scope="module")
def out() -> dict[str, torch.Tensor]:
    return dict(zip(CALLS, run_interpreted(list(CALLS.values()))))


def test_swaps_follow_eq5_and_never_keep_the_id(out) -> None:
    tv = row_total_variation(empirical_transitions(LAW_IDS, out["law"], 6), se_matrix(6, 0.3))
    assert float(tv.max()) < 0.03
    assert not (out["all"] == LAW_IDS).any()
    assert torch.equal(out["none"], LAW_IDS)


def test_swap_rate_is_p(out) -> None:
    n, p = RATE_IDS.numel(), 0.05
    rate = (out["rate"] != RATE_IDS).double().mean().item()
    assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / n)
    assert int(out["rate"].min()) >= 0 and int(out["rate"].max()) < 1000


def test_same_seed_and_offset_repeat_and_other_offsets_differ(out) -> None:
    assert out["repeat_a"].shape == REPEAT_IDS.shape and out["repeat_a"].dtype == REPEAT_IDS.dtype
    assert torch.equal(out["repeat_a"], out["repeat_b"])
    assert not torch.equal(out["next_offset"], out["repeat_a"])
    assert not torch.equal(out["next_seed"], out["repeat_a"])


def test_padding_class_is_kept_and_never_drawn(out) -> None:
    swapped, real = out["padding"], LABELS != 0
    assert torch.equal(swapped[~real], LABELS[~real])
    assert not (swapped[real] == 0).any() and not (swapped[real] == LABELS[real]).any()
    counts = torch.bincount(swapped[LABELS == 3], minlength=6).double()
    expected = (LABELS == 3).sum().item() / 4  # uniform among the N - 2 other real classes
    for k in (1, 2, 4, 5):
        assert abs(counts[k] - expected) < 5 * math.sqrt(expected)


def test_keep_value_outside_the_range_and_narrow_dtypes(out) -> None:
    swapped, real = out["narrow"], NARROW_LABELS != -100
    assert swapped.dtype == torch.int32 and swapped.shape == NARROW_LABELS.shape
    assert torch.equal(swapped == -100, ~real)
    assert not (swapped[real] == NARROW_LABELS[real]).any()
    assert int(swapped.max()) < 5 and int(swapped[real].min()) >= 0


def test_cpu_ids_take_no_cuda_kernel() -> None:
    assert sampler.cuda_sampler(torch.tensor([1, 2])) is None

"""SSE-SE and label SSE with an excluded id set (a tokenizer's special ids): never swapped, never drawn, uniform."""

from __future__ import annotations

import pytest
import torch

from embreg.errors import EmbregError
from embreg.sse import SSE, LabelSSE
from embreg.sse.exclusion import ExcludedIds

SPECIALS = (0, 3, 4, 9)
N = 12


@pytest.mark.parametrize("make", [lambda **k: SSE(N, **k), lambda **k: LabelSSE(N, **k)], ids=["sse", "label-sse"])
def test_excluded_ids_are_kept_and_never_drawn(make) -> None:
    transform = make(p=1.0, seed=0, exclude=SPECIALS)
    ids = torch.arange(N).repeat(2000)
    out = transform(ids)
    special = torch.isin(ids, torch.tensor(SPECIALS))
    assert torch.equal(out[special], ids[special])
    assert not torch.isin(out[~special], torch.tensor(SPECIALS)).any()
    assert (out[~special] != ids[~special]).all()  # p = 1: every allowed id moves to another allowed id


def test_replacements_are_uniform_among_the_other_allowed_ids() -> None:
    transform = SSE(N, p=1.0, seed=1, exclude=SPECIALS)
    out = transform(torch.full((80_000,), 5))
    allowed = [i for i in range(N) if i not in SPECIALS and i != 5]
    counts = torch.bincount(out, minlength=N).double()
    expected = 80_000 / len(allowed)
    assert counts[list(SPECIALS) + [5]].sum() == 0
    assert ((counts[allowed] - expected).abs() / expected).max() < 0.05  # ~ 5 standard deviations at 11,400 draws


def test_swap_rate_matches_p_among_allowed_ids() -> None:
    out = SSE(1000, p=0.1, seed=2, exclude=range(5))(ids := torch.randint(5, 1000, (100_000,)))
    assert abs((out != ids).double().mean().item() - 0.1) < 0.004


def test_p_zero_and_eval_are_the_identity() -> None:
    ids = torch.randint(0, N, (50,))
    assert SSE(N, p=0.0, exclude=SPECIALS)(ids) is ids
    assert LabelSSE(N, p=0.5, exclude=SPECIALS).eval()(ids) is ids


def test_label_sse_keeps_ignore_index_with_an_exclude_set() -> None:
    targets = torch.tensor([[5, -100, 7, 0]] * 500)
    out = LabelSSE(N, p=1.0, seed=0, exclude=SPECIALS)(targets)
    assert (out[:, 1] == -100).all() and (out[:, 3] == 0).all()
    assert not torch.isin(out[:, [0, 2]], torch.tensor(SPECIALS)).any()


def test_without_exclusions_the_stream_is_unchanged() -> None:
    ids = torch.randint(0, N, (4, 30))
    assert torch.equal(SSE(N, p=0.3, seed=5)(ids), SSE(N, p=0.3, seed=5, exclude=())(ids))


def test_bad_exclusions_are_refused() -> None:
    with pytest.raises(EmbregError, match=r"excluded ids \[12\] are outside \[0, 12\)"):
        ExcludedIds(N, [12])
    with pytest.raises(EmbregError, match="at least two allowed ids"):
        SSE(3, p=0.1, exclude=[0, 1])

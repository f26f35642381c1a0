"""LabelSSE: swaps targets, leaves ignore_index positions alone, relates to label smoothing."""

from __future__ import annotations

import pytest
import torch
from scipy import stats

from embreg.errors import EmbregError
from embreg.sse import LabelSSE


def test_ignore_index_positions_are_kept() -> None:
    targets = torch.randint(0, 10, (64, 30), generator=torch.Generator().manual_seed(0))
    targets[:, 20:] = -100
    out = LabelSSE(10, p=1.0, seed=0)(targets)
    padding = targets == -100
    assert bool((out[padding] == -100).all())
    assert not (out[~padding] == targets[~padding]).any()
    assert int(out[~padding].min()) >= 0 and int(out[~padding].max()) < 10


def test_padding_class_inside_the_range_is_neither_left_nor_drawn() -> None:
    num_classes, per_class = 6, 60_000
    targets = torch.arange(num_classes).repeat(per_class)  # class 0 is padding
    out = LabelSSE(num_classes, p=1.0, ignore_index=0, seed=3)(targets)
    assert bool((out[targets == 0] == 0).all())
    real = targets != 0
    assert not (out[real] == 0).any()
    assert not (out[real] == targets[real]).any()
    for label in range(1, num_classes):
        counts = torch.bincount(out[targets == label], minlength=num_classes)
        others = [k for k in range(1, num_classes) if k != label]
        assert stats.chisquare(counts[others].numpy()).pvalue > 1e-4


def test_mean_one_hot_target_is_the_smoothed_label() -> None:
    num_classes, p, draws = 5, 0.2, 400_000
    targets = torch.full((draws,), 2)
    out = LabelSSE(num_classes, p=p, seed=1)(targets)
    mean_target = torch.nn.functional.one_hot(out, num_classes).double().mean(0)
    expected = torch.full((num_classes,), p / (num_classes - 1), dtype=torch.float64)
    expected[2] = 1 - p
    torch.testing.assert_close(mean_target, expected, rtol=0, atol=3e-3)


def test_out_of_range_labels_raise_but_ignore_index_passes() -> None:
    label_sse = LabelSSE(10, p=0.1, ignore_index=-1, seed=0)
    assert label_sse(torch.tensor([-1, 3])).shape == (2,)
    with pytest.raises(EmbregError, match=r"from -100 to -100; valid range is \[0, 10\) \(or ignore_index=-1\)"):
        label_sse(torch.tensor([-100, 3]))
    with pytest.raises(EmbregError, match=r"from 10 to 10"):
        label_sse(torch.tensor([10, 3]))


def test_padding_class_needs_three_classes_and_ignore_index_must_be_int() -> None:
    with pytest.raises(EmbregError, match="num_classes=2 must be >= 3"):
        LabelSSE(2, p=0.1, ignore_index=0)
    with pytest.raises(EmbregError, match="ignore_index=0.5"):
        LabelSSE(10, p=0.1, ignore_index=0.5)  # type: ignore[arg-type]
    assert LabelSSE(10, p=0.1, seed=0).num_classes == 10
    assert "ignore_index=-100" in repr(LabelSSE(10, p=0.1, seed=0))

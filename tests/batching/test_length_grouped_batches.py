"""Length-grouped batches: every example once per epoch, similar lengths per batch, seeded, sharded alike."""

from __future__ import annotations

import pytest
import torch

from embreg.batching.batches import TensorBatches
from embreg.batching.length_grouped_batches import LengthGroupedBatches, length_grouped_order


def _lengths(n: int = 1000) -> torch.Tensor:
    return torch.randint(3, 129, (n,), generator=torch.Generator().manual_seed(0))


def _padded_tokens(batches: TensorBatches, lengths: torch.Tensor, epoch: int = 0) -> int:
    return sum(int(lengths[b["i"]].max()) * b["i"].numel() for b in batches.epoch(epoch))


def test_every_example_once_per_epoch_and_the_incomplete_batch_last() -> None:
    lengths = _lengths(1001)
    batches = LengthGroupedBatches({"i": torch.arange(1001)}, lengths, batch_size=32, group_batches=5, seed=3)
    for epoch in (0, 1):
        seen = [b["i"] for b in batches.epoch(epoch)]
        assert sorted(torch.cat(seen).tolist()) == list(range(1001))
        assert [s.numel() for s in seen] == [32] * 31 + [9]
    assert len(batches) == 32


def test_batches_hold_similar_lengths_so_far_less_padding() -> None:
    lengths = _lengths()
    tensors = {"i": torch.arange(1000)}
    grouped = _padded_tokens(LengthGroupedBatches(tensors, lengths, batch_size=32, seed=0), lengths)
    random = _padded_tokens(TensorBatches(tensors, batch_size=32, seed=0), lengths)
    real = int(lengths.sum())
    assert grouped < 1.05 * real < 1.3 * real < random  # uniform lengths 3..128: random batches pad to ~125


def test_the_order_is_seeded_by_epoch_and_batches_come_in_a_random_order() -> None:
    lengths = _lengths()
    make = lambda seed: LengthGroupedBatches({"i": torch.arange(1000)}, lengths, batch_size=10, seed=seed)  # noqa: E731
    a, b = make(0), make(0)
    first = [x["i"].tolist() for x in a.epoch(0)]
    assert first == [x["i"].tolist() for x in b.epoch(0)]
    assert first != [x["i"].tolist() for x in a.epoch(1)]
    longest = [int(lengths[torch.tensor(batch)].max()) for batch in first]
    assert longest != sorted(longest, reverse=True) and longest != sorted(longest)


def test_each_rank_gets_a_disjoint_share_of_similar_lengths() -> None:
    lengths = _lengths(64)
    batches = LengthGroupedBatches({"i": torch.arange(64)}, lengths, batch_size=4, seed=0)
    shards = [[b["i"] for b in batches.sharded(rank, 2).epoch(0)] for rank in (0, 1)]
    assert sorted(torch.cat(shards[0] + shards[1]).tolist()) == list(range(64))
    for left, right in zip(*shards, strict=True):  # the two ranks' batches of one step come from one sorted unit
        together = torch.cat([lengths[left], lengths[right]])
        assert int(together.max() - together.min()) <= int(lengths.max() - lengths.min()) // 2


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match=r"lengths has shape \(3,\), expected \(4,\)"):
        LengthGroupedBatches({"i": torch.arange(4)}, torch.ones(3), batch_size=2)
    with pytest.raises(ValueError, match="group_batches=0 must be >= 1"):
        LengthGroupedBatches({"i": torch.arange(4)}, torch.ones(4), batch_size=2, group_batches=0)
    with pytest.raises(ValueError, match="unit=0"):
        length_grouped_order(torch.arange(4), torch.ones(4), 0, 1, torch.Generator())


def test_bert_masking_keeps_its_rates_on_length_grouped_batches() -> None:
    """Grouping changes which texts share a batch, not the masking law: 15 % of every length's tokens selected."""
    from embreg.data.mlm_masking import IGNORE_INDEX, BertMasking

    n, t = 3000, 64
    lengths = torch.randint(3, t + 1, (n,), generator=torch.Generator().manual_seed(1))
    attention = (torch.arange(t) < lengths[:, None]).long()
    ids = torch.where(attention.bool(), torch.randint(10, 500, (n, t), generator=torch.Generator()), 0)
    masking = BertMasking(500, (0, 1, 2, 3, 4), 4)
    batches = LengthGroupedBatches({"input_ids": ids, "attention_mask": attention}, lengths, batch_size=32, seed=0,
                                   transform=lambda b, g: {**b, "labels": masking(b["input_ids"], b["attention_mask"], g)[1]})  # fmt: skip
    short = long = short_tokens = long_tokens = 0
    for batch in batches.epoch(0):
        selected = (batch["labels"] != IGNORE_INDEX).sum(dim=1)
        is_short = batch["attention_mask"].sum(dim=1) <= t // 2
        short, long = short + int(selected[is_short].sum()), long + int(selected[~is_short].sum())
        short_tokens += int(batch["attention_mask"][is_short].sum())
        long_tokens += int(batch["attention_mask"][~is_short].sum())
    assert abs(short / short_tokens - 0.15) < 0.01 and abs(long / long_tokens - 0.15) < 0.01

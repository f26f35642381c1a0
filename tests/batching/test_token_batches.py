"""TokenBudgetBatches: every example once per epoch, the budget and the cap kept, length-sorted batches cut to their
width, the same cuts every epoch, a seeded order, and disjoint data-parallel shares."""

from __future__ import annotations

import pytest
import torch

from embreg.batching.token_batches import TokenBudgetBatches, budget_cuts


def _pairs(n: int = 500, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    source = torch.zeros(n, 20, dtype=torch.long)
    target = torch.zeros(n, 22, dtype=torch.long)
    for i in range(n):
        s, t = (
            int(torch.randint(1, 21, (1,), generator=generator)),
            int(torch.randint(2, 23, (1,), generator=generator)),
        )
        source[i, :s] = 1000 + i  # the example's id, to follow it
        target[i, :t] = 1000 + i
    return {"source": source, "target": target}


def test_an_epoch_holds_every_example_once_within_budget_and_cap() -> None:
    pairs = _pairs()
    batches = TokenBudgetBatches(pairs, max_tokens=200, max_examples=16, seed=0)
    seen = []
    for batch in batches.epoch(0):
        rows, width = batch["source"].shape[0], max(batch["source"].shape[1], batch["target"].shape[1])
        assert rows <= 16 and (rows * width <= 200 or rows == 1)
        for name in ("source", "target"):  # cut to the batch's longest row, rows unchanged
            assert bool((batch[name][:, -1] != 0).any())
        seen += batch["source"][:, 0].tolist()
    assert sorted(seen) == list(range(1000, 1500))
    assert len(list(batches.epoch(0))) == len(batches)


def test_batches_group_similar_lengths_and_have_little_padding() -> None:
    pairs = _pairs(2000)
    padded = real = 0
    for batch in TokenBudgetBatches(pairs, max_tokens=256, seed=0).epoch(0):
        lengths = (batch["source"] != 0).sum(dim=1)
        assert int(lengths.max() - lengths.min()) <= 1  # sorted by source length first
        for t in batch.values():
            padded += t.numel()
            real += int((t != 0).sum())
    assert 1 - real / padded < 0.15  # random batches of this data are about half padding


def test_epochs_share_their_cuts_but_not_their_order_and_replay_by_seed() -> None:
    pairs = _pairs()
    batches = TokenBudgetBatches(pairs, max_tokens=200, seed=5)
    first = [b["source"][:, 0].tolist() for b in batches.epoch(0)]
    second = [b["source"][:, 0].tolist() for b in batches.epoch(1)]
    assert len(first) == len(second) == len(batches)
    assert sorted(map(len, first)) == sorted(map(len, second))
    assert first != second
    assert [b["source"][:, 0].tolist() for b in TokenBudgetBatches(pairs, max_tokens=200, seed=5).epoch(0)] == first


def test_data_parallel_shares_are_disjoint_and_equally_long() -> None:
    batches = TokenBudgetBatches(_pairs(), max_tokens=300, seed=0)
    shares = [list(batches.sharded(rank, 3).epoch(2)) for rank in range(3)]
    assert len({len(share) for share in shares}) == 1 and len(shares[0]) == len(batches.sharded(0, 3))
    ids = [i for share in shares for b in share for i in b["source"][:, 0].tolist()]
    assert set(ids) == set(range(1000, 1500))  # every example, a few batches twice to even the shares out


def test_budget_cuts_and_bad_arguments() -> None:
    assert budget_cuts(torch.tensor([1, 1, 1, 5]), max_tokens=3) == [3, 4]
    assert budget_cuts(torch.tensor([9, 9]), max_tokens=4) == [1, 2]  # wider than the budget: alone
    assert budget_cuts(torch.tensor([1, 1, 1]), max_tokens=10, max_examples=2) == [2, 3]
    with pytest.raises(ValueError, match="max_tokens=0"):
        TokenBudgetBatches(_pairs(10), max_tokens=0)
    with pytest.raises(ValueError, match="same, non-zero number of rows"):
        TokenBudgetBatches({"a": torch.ones(2, 3), "b": torch.ones(3, 3)}, max_tokens=8)

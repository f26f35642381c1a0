"""Next-item evaluator: history exclusion, pessimistic ties, sampled metrics, shared negatives, metric keys."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from embreg.data.sequences import SequenceSplit, sampled_negatives
from embreg.errors import ConfigError, EmbregError
from embreg.tasks.next_item.evaluation import NextItemEvaluator, target_ranks

NUM_ITEMS = 8


def small_split() -> SequenceSplit:
    """Users 0 and 2; user 0: train [0, 1], valid 2, test 3; user 2: train [4], valid 5, test 6."""
    return SequenceSplit(
        users=np.array([0, 2]),
        train=[np.array([0, 1]), np.array([4])],
        valid_items=np.array([2, 5]),
        test_items=np.array([3, 6]),
        num_users=3,
        num_items=NUM_ITEMS,
        dropped_users=1,
        min_interactions=3,
    )


class TableModel(nn.Module):
    """score_next returns a fixed (num_users, num_items) table row per user; records its batches and mode."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = nn.Parameter(table.clone())
        self.batches: list[dict[str, torch.Tensor]] = []
        self.modes: list[bool] = []

    def score_next(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        self.batches.append(batch)
        self.modes.append(self.training)
        return self.table[batch["user"]]


def test_history_excluded_in_full_ranking() -> None:
    # history items score highest, then the target: rank 0 once the history is excluded
    table = torch.zeros(3, NUM_ITEMS)
    table[0, [0, 1]] = 10.0
    table[0, 2] = 5.0  # valid target of user 0
    table[2, 4] = 10.0
    table[2, 5] = 5.0  # valid target of user 2
    metrics = NextItemEvaluator(small_split(), max_len=4)(TableModel(table), "valid")
    assert metrics == {"ndcg@10": 1.0, "hit@10": 1.0, "mrr": 1.0}


def test_target_never_excluded_and_test_history_includes_valid_item() -> None:
    table = torch.zeros(3, NUM_ITEMS)
    table[0, 2] = 10.0  # user 0's valid item: in the test history, so excluded for test
    table[0, 3] = 5.0
    table[2, 5] = 10.0
    table[2, 6] = 5.0
    ev = NextItemEvaluator(small_split(), max_len=4)
    assert ev.ranks(TableModel(table), "test")["full"].tolist() == [0, 0]
    # for the valid split, item 2 is user 0's target and must never be excluded
    assert ev.ranks(TableModel(table), "valid")["full"].tolist() == [0, 0]


def test_ties_are_pessimistic() -> None:
    ev = NextItemEvaluator(small_split(), max_len=4, ks=(1, 5, 10))
    ranks = ev.ranks(TableModel(torch.zeros(3, NUM_ITEMS)), "valid")["full"]
    # a constant model ranks last: user 0 has 8 - 2 candidates, user 2 has 8 - 1
    assert ranks.tolist() == [5, 6]
    metrics = ev(TableModel(torch.zeros(3, NUM_ITEMS)), "valid")
    assert metrics["hit@1"] == 0.0 and metrics["hit@5"] == 0.0 and metrics["hit@10"] == 1.0
    assert metrics["mrr"] == pytest.approx((1 / 6 + 1 / 7) / 2)


def test_target_ranks_function() -> None:
    scores = torch.tensor([[3.0, 2.0, 2.0, 1.0], [float("nan"), 1.0, 0.0, 0.0]])
    assert target_ranks(scores, torch.tensor([1, 0])).tolist() == [2, 3]
    exclude = torch.tensor([[True, False, False, False], [False, True, False, False]])
    assert target_ranks(scores, torch.tensor([1, 1]), exclude).tolist() == [1, 0]
    assert target_ranks(scores, torch.tensor([0, 0]), exclude).tolist() == [0, 2]
    with pytest.raises(EmbregError, match="targets"):
        target_ranks(scores, torch.tensor([0]))
    with pytest.raises(EmbregError, match="exclude_mask"):
        target_ranks(scores, torch.tensor([0, 0]), torch.zeros(2, 3, dtype=torch.bool))


def test_sampled_metrics_hand_computed() -> None:
    split = small_split()
    uniform = torch.tensor([[4, 5, 6], [0, 1, 7]])
    popular = torch.tensor([[7, 6, 5], [2, 3, 7]])
    table = torch.zeros(3, NUM_ITEMS)
    table[0] = torch.tensor([9.0, 9.0, 3.0, 0.0, 4.0, 1.0, 2.0, 0.0])  # user 0, valid target 2
    table[2] = torch.tensor([5.0, 1.0, 5.0, 0.0, 9.0, 2.0, 0.0, 3.0])  # user 2, valid target 5
    ev = NextItemEvaluator(split, max_len=4, negatives={"uniform": uniform, "popularity": popular}, ks=(1, 2))
    ranks = ev.ranks(TableModel(table), "valid")
    # uniform: user 0: target 3.0 vs [4, 1, 2] -> rank 1; user 2: target 2 vs [5, 1, 3] -> rank 2
    # popularity: user 0: 3.0 vs [0, 2, 1] -> rank 0; user 2: 2 vs [5, 0, 3] -> rank 2
    assert ranks["uniform"].tolist() == [1, 2] and ranks["popularity"].tolist() == [0, 2]
    metrics = ev(TableModel(table), "valid")
    assert metrics["sampled_hit@1"] == 0.0 and metrics["sampled_hit@2"] == 0.5
    assert metrics["sampled_ndcg@2"] == pytest.approx((1 / math.log2(3)) / 2)
    assert metrics["pop_sampled_hit@1"] == 0.5 and metrics["pop_sampled_ndcg@1"] == 0.5
    assert metrics["pop_sampled_ndcg@2"] == pytest.approx(0.5)


def test_metric_keys_exactly() -> None:
    split = small_split()
    negs = sampled_negatives(split, n=3, seed=0)
    ev = NextItemEvaluator(split, max_len=4, negatives={"uniform": negs, "popularity": negs}, ks=(5, 10))
    keys = list(ev(TableModel(torch.randn(3, NUM_ITEMS)), "test"))
    assert keys == [
        "ndcg@5",
        "hit@5",
        "ndcg@10",
        "hit@10",
        "mrr",
        "sampled_ndcg@5",
        "sampled_hit@5",
        "sampled_ndcg@10",
        "sampled_hit@10",
        "pop_sampled_ndcg@5",
        "pop_sampled_hit@5",
        "pop_sampled_ndcg@10",
        "pop_sampled_hit@10",
    ]
    assert list(NextItemEvaluator(split, max_len=4)(TableModel(torch.randn(3, NUM_ITEMS)), "test")) == [
        "ndcg@10",
        "hit@10",
        "mrr",
    ]


def test_same_negatives_for_two_models_and_inputs() -> None:
    split = small_split()
    negs = {"uniform": sampled_negatives(split, n=4, seed=7)}
    ev = NextItemEvaluator(split, max_len=3, negatives=negs, batch_size=1)
    a, b = TableModel(torch.randn(3, NUM_ITEMS)), TableModel(torch.randn(3, NUM_ITEMS))
    ev(a, "test")
    ev(b, "test")
    assert torch.equal(ev.negatives["uniform"], sampled_negatives(split, n=4, seed=7))
    for model in (a, b):
        assert [batch["user"].tolist() for batch in model.batches] == [[0], [2]]
        assert [batch["input"].tolist() for batch in model.batches] == [[[0, 1, 2]], [[NUM_ITEMS, 4, 5]]]


def test_eval_mode_no_grad_and_mode_restored() -> None:
    model = TableModel(torch.randn(3, NUM_ITEMS))
    model.train()
    ev = NextItemEvaluator(small_split(), max_len=2)
    ev(model, "valid")
    assert model.modes == [False] and model.training
    model.eval()
    ev(model, "valid")
    assert not model.training


def test_batching_gives_the_same_metrics() -> None:
    model = TableModel(torch.randn(3, NUM_ITEMS))
    negs = {"popularity": sampled_negatives(small_split(), n=2, seed=0)}
    one = NextItemEvaluator(small_split(), max_len=3, negatives=negs, batch_size=1)(model, "test")
    many = NextItemEvaluator(small_split(), max_len=3, negatives=negs)(model, "test")
    assert one == pytest.approx(many)


def test_errors() -> None:
    split = small_split()
    with pytest.raises(ConfigError, match="unknown negatives"):
        NextItemEvaluator(split, max_len=2, negatives={"random": torch.zeros(2, 3, dtype=torch.long)})
    with pytest.raises(EmbregError, match="shape"):
        NextItemEvaluator(split, max_len=2, negatives={"uniform": torch.zeros(3, 3, dtype=torch.long) + 7})
    with pytest.raises(EmbregError, match="target"):
        NextItemEvaluator(split, max_len=2, negatives={"uniform": torch.tensor([[2, 7], [7, 7]])})
    with pytest.raises(ConfigError, match="ks"):
        NextItemEvaluator(split, max_len=2, ks=(0,))
    with pytest.raises(ConfigError, match="batch_size"):
        NextItemEvaluator(split, max_len=2, batch_size=0)
    ev = NextItemEvaluator(split, max_len=2)
    with pytest.raises(KeyError, match="unknown split"):
        ev(TableModel(torch.zeros(3, NUM_ITEMS)), "train")
    with pytest.raises(EmbregError, match="score_next"):
        ev(TableModel(torch.zeros(3, NUM_ITEMS + 1)), "valid")

"""Tests of ``embreg.metrics.recommendation`` against hand-computed cases, slow per-user loops and scikit-learn."""

import math

import numpy as np
import pytest
import torch

from embreg.errors import EmbregError
from embreg.metrics.recommendation import mae, ranking_metrics, rmse, topk_excluding

# ---------------------------------------------------------------------------------------------------------------
# slow, obvious reference implementations


def slow_topk(scores: torch.Tensor, excluded: set[tuple[int, int]], k: int) -> list[list[int]]:
    result = []
    for u, row in enumerate(scores.tolist()):
        allowed = [(-s, i) for i, s in enumerate(row) if (u, i) not in excluded]
        blocked = [(i,) for i in range(len(row)) if (u, i) in excluded]
        ranked = [i for _, i in sorted(allowed)] + [i for (i,) in sorted(blocked)]
        result.append(ranked[:k])
    return result


def slow_ranking_metrics(topk: list[list[int]], relevant: dict[int, set[int]], ks: tuple[int, ...]) -> dict:
    sums: dict[str, float] = {}
    users = [u for u in range(len(topk)) if relevant.get(u)]
    for k in ks:
        for name in ("precision", "recall", "ndcg", "hit"):
            sums[f"{name}@{k}"] = 0.0
        for u in users:
            rel = relevant[u]
            found = [1.0 if item in rel else 0.0 for item in topk[u][:k]]
            dcg = sum(f / math.log2(r + 2) for r, f in enumerate(found))
            idcg = sum(1.0 / math.log2(r + 2) for r in range(min(k, len(rel))))
            sums[f"precision@{k}"] += sum(found) / k
            sums[f"recall@{k}"] += sum(found) / len(rel)
            sums[f"ndcg@{k}"] += dcg / idcg
            sums[f"hit@{k}"] += 1.0 if sum(found) > 0 else 0.0
    return {key: value / len(users) for key, value in sums.items()}


def random_interactions(gen: torch.Generator, num_users: int, num_items: int, count: int) -> tuple:
    users = torch.randint(0, num_users, (count,), generator=gen)
    items = torch.randint(0, num_items, (count,), generator=gen)
    return users, items


# ---------------------------------------------------------------------------------------------------------------
# rmse / mae


def test_rmse_and_mae_hand_computed() -> None:
    pred = torch.tensor([1.0, 2.0, 4.0, 0.0])
    target = torch.tensor([1.0, 3.0, 2.0, 2.0])
    assert rmse(pred, target) == pytest.approx(math.sqrt((0 + 1 + 4 + 4) / 4))
    assert mae(pred, target) == pytest.approx((0 + 1 + 2 + 2) / 4)
    assert isinstance(rmse(pred, target), float) and isinstance(mae(pred, target), float)


def test_rmse_and_mae_match_numpy_on_random_data() -> None:
    gen = torch.Generator().manual_seed(0)
    pred = torch.randn(3, 50, generator=gen)
    target = torch.randn(3, 50, generator=gen)
    diff = pred.double().numpy() - target.double().numpy()
    assert rmse(pred, target) == pytest.approx(float(np.sqrt(np.mean(diff**2))), rel=1e-12)
    assert mae(pred, target) == pytest.approx(float(np.mean(np.abs(diff))), rel=1e-12)


def test_rating_metrics_do_not_track_gradients() -> None:
    pred = torch.tensor([1.0, 2.0], requires_grad=True)
    assert rmse(pred, torch.tensor([1.0, 2.0])) == 0.0


@pytest.mark.parametrize("fn", [rmse, mae])
def test_rating_metrics_reject_shape_mismatch_and_empty(fn) -> None:
    with pytest.raises(EmbregError, match=r"same shape, got \(3, 1\) and \(3,\)"):
        fn(torch.zeros(3, 1), torch.zeros(3))
    with pytest.raises(EmbregError, match="empty"):
        fn(torch.zeros(0), torch.zeros(0))


# ---------------------------------------------------------------------------------------------------------------
# topk_excluding


def test_topk_excluding_hand_computed_with_ties() -> None:
    scores = torch.tensor([[0.5, 0.9, 0.9, 0.1, 0.9], [1.0, 1.0, 1.0, 1.0, 1.0]])
    topk = topk_excluding(scores, torch.tensor([0, 1]), torch.tensor([2, 0]), k=4)
    assert topk.dtype == torch.int64
    assert topk.tolist() == [[1, 4, 0, 3], [1, 2, 3, 4]]


def test_topk_excluding_does_not_modify_scores() -> None:
    scores = torch.tensor([[0.1, 0.2, 0.3]])
    before = scores.clone()
    topk_excluding(scores, torch.tensor([0]), torch.tensor([2]), k=2)
    assert torch.equal(scores, before)


def test_topk_excluding_fills_with_excluded_items_when_few_are_allowed() -> None:
    scores = torch.tensor([[0.3, 0.2, 0.1]])
    topk = topk_excluding(scores, torch.tensor([0, 0]), torch.tensor([0, 1]), k=3)
    assert topk.tolist() == [[2, 0, 1]]


def test_topk_excluding_matches_slow_reference_on_random_data_with_ties() -> None:
    gen = torch.Generator().manual_seed(1)
    num_users, num_items = 17, 23
    # Rounded scores give many ties, exercising the tie rule.
    scores = torch.round(torch.rand(num_users, num_items, generator=gen) * 5) / 5
    users, items = random_interactions(gen, num_users, num_items, 120)
    excluded = set(zip(users.tolist(), items.tolist()))
    topk = topk_excluding(scores, users, items, k=10)
    assert topk.tolist() == slow_topk(scores, excluded, 10)


def test_topk_excluding_accepts_empty_exclusion() -> None:
    scores = torch.tensor([[0.1, 0.3, 0.2]])
    empty = torch.zeros(0, dtype=torch.long)
    assert topk_excluding(scores, empty, empty, k=3).tolist() == [[1, 2, 0]]


@pytest.mark.parametrize(
    ("scores", "users", "items", "k", "fragment"),
    [
        (torch.zeros(2, 3), [0], [0], 0, r"k must be an int in \[1, 3\]"),
        (torch.zeros(2, 3), [0], [0], 4, r"got 4"),
        (torch.zeros(3), [0], [0], 1, "2-D floating tensor"),
        (torch.zeros(2, 3, dtype=torch.long), [0], [0], 1, "2-D floating tensor"),
        (torch.zeros(2, 3), [2], [0], 1, r"exclude_users holds id 2, outside the valid range \[0, 1\]"),
        (torch.zeros(2, 3), [0], [-1], 1, r"exclude_items holds id -1"),
        (torch.zeros(2, 3), [0, 1], [0], 1, "differ in length: 2 vs 1"),
        (torch.tensor([[0.0, float("nan")]]), [0], [0], 1, "NaN"),
    ],
)
def test_topk_excluding_rejects_bad_input(scores, users, items, k, fragment) -> None:
    with pytest.raises(EmbregError, match=fragment):
        topk_excluding(scores, torch.tensor(users), torch.tensor(items), k)


# ---------------------------------------------------------------------------------------------------------------
# ranking_metrics


def test_ranking_metrics_hand_computed() -> None:
    # user 0: relevant {1, 3}; ranked [1, 0, 3] -> hits at ranks 1 and 3
    # user 1: relevant {2};    ranked [0, 1, 2] -> hit at rank 3
    # user 2: nothing relevant -> left out
    topk = torch.tensor([[1, 0, 3], [0, 1, 2], [0, 1, 2]])
    m = ranking_metrics(topk, torch.tensor([0, 0, 1]), torch.tensor([1, 3, 2]), num_items=4, ks=(1, 3))
    assert list(m) == ["precision@1", "recall@1", "ndcg@1", "hit@1", "precision@3", "recall@3", "ndcg@3", "hit@3"]
    assert m["precision@1"] == pytest.approx((1 + 0) / 2)
    assert m["recall@1"] == pytest.approx((0.5 + 0) / 2)
    assert m["hit@1"] == pytest.approx(0.5)
    assert m["ndcg@1"] == pytest.approx(0.5)
    assert m["precision@3"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert m["recall@3"] == pytest.approx((1.0 + 1.0) / 2)
    assert m["hit@3"] == pytest.approx(1.0)
    ndcg_u0 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    ndcg_u1 = (1 / math.log2(4)) / 1.0
    assert m["ndcg@3"] == pytest.approx((ndcg_u0 + ndcg_u1) / 2)


def test_ranking_metrics_counts_duplicate_relevant_pairs_once() -> None:
    topk = torch.tensor([[0, 1]])
    once = ranking_metrics(topk, torch.tensor([0, 0]), torch.tensor([0, 2]), num_items=3, ks=(2,))
    twice = ranking_metrics(topk, torch.tensor([0, 0, 0]), torch.tensor([0, 2, 2]), num_items=3, ks=(2,))
    assert once == twice
    assert once["recall@2"] == pytest.approx(0.5)


def test_ranking_metrics_perfect_ranking_scores_one() -> None:
    topk = torch.tensor([[3, 1, 0, 2]])
    m = ranking_metrics(topk, torch.tensor([0, 0]), torch.tensor([1, 3]), num_items=4, ks=(2, 4))
    assert m["ndcg@2"] == pytest.approx(1.0)
    assert m["ndcg@4"] == pytest.approx(1.0)
    assert m["recall@2"] == pytest.approx(1.0)
    assert m["precision@4"] == pytest.approx(0.5)


def test_ranking_metrics_match_slow_reference_on_random_data() -> None:
    gen = torch.Generator().manual_seed(2)
    num_users, num_items = 40, 30
    scores = torch.rand(num_users, num_items, generator=gen)
    ex_users, ex_items = random_interactions(gen, num_users, num_items, 300)
    rel_users, rel_items = random_interactions(gen, num_users, num_items, 150)
    ks = (1, 3, 5, 10)
    topk = topk_excluding(scores, ex_users, ex_items, k=10)
    relevant: dict[int, set[int]] = {}
    for u, i in zip(rel_users.tolist(), rel_items.tolist()):
        relevant.setdefault(u, set()).add(i)
    expected = slow_ranking_metrics(topk.tolist(), relevant, ks)
    actual = ranking_metrics(topk, rel_users, rel_items, num_items, ks=ks)
    assert actual.keys() == expected.keys()
    for key in expected:
        assert actual[key] == pytest.approx(expected[key], rel=1e-12, abs=1e-12), key


def test_ranking_ndcg_matches_sklearn() -> None:
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    gen = torch.Generator().manual_seed(3)
    num_users, num_items = 25, 40
    scores = torch.rand(num_users, num_items, generator=gen, dtype=torch.float64)  # continuous: no ties
    rel_users, rel_items = random_interactions(gen, num_users, num_items, 120)
    relevance = np.zeros((num_users, num_items))
    relevance[rel_users.numpy(), rel_items.numpy()] = 1.0
    keep = relevance.sum(axis=1) > 0
    empty = torch.zeros(0, dtype=torch.long)
    topk = topk_excluding(scores, empty, empty, k=10)
    actual = ranking_metrics(topk, rel_users, rel_items, num_items, ks=(1, 5, 10))
    for k in (1, 5, 10):
        expected = sklearn_metrics.ndcg_score(relevance[keep], scores.numpy()[keep], k=k)
        assert actual[f"ndcg@{k}"] == pytest.approx(expected, rel=1e-10)


def test_ranking_metrics_accepts_int32_inputs() -> None:
    m64 = ranking_metrics(torch.tensor([[1, 0]]), torch.tensor([0]), torch.tensor([0]), num_items=2, ks=(2,))
    m32 = ranking_metrics(
        torch.tensor([[1, 0]], dtype=torch.int32),
        torch.tensor([0], dtype=torch.int32),
        torch.tensor([0], dtype=torch.int32),
        num_items=2,
        ks=(2,),
    )
    assert m64 == m32
    assert m64["ndcg@2"] == pytest.approx(1 / math.log2(3))


@pytest.mark.parametrize(
    ("topk", "users", "items", "num_items", "ks", "fragment"),
    [
        ([[0, 1]], [0], [0], 2, (3,), r"ks must be a non-empty list of ints in \[1, 2\]"),
        ([[0, 1]], [0], [0], 2, (), "ks must be a non-empty"),
        ([[0, 1]], [0], [5], 2, (1,), r"relevant_items holds id 5, outside the valid range \[0, 1\]"),
        ([[0, 1]], [1], [0], 2, (1,), r"relevant_users holds id 1, outside the valid range \[0, 0\]"),
        ([[0, 7]], [0], [0], 2, (1,), r"topk holds item 7, outside the valid range \[0, 1\]"),
        ([[1, 1]], [0], [0], 2, (1,), "repeats an item"),
        ([[0, 1]], [], [], 2, (1,), "no user has a relevant item"),
        ([[0, 1]], [0], [0], 0, (1,), "num_items must be a positive int"),
    ],
)
def test_ranking_metrics_rejects_bad_input(topk, users, items, num_items, ks, fragment) -> None:
    with pytest.raises(EmbregError, match=fragment):
        ranking_metrics(
            torch.tensor(topk),
            torch.tensor(users, dtype=torch.long),
            torch.tensor(items, dtype=torch.long),
            num_items,
            ks=ks,
        )

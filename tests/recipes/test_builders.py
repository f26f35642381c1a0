"""Builders wire the per-table SSE probabilities and the tasks' batches and evaluators (synthetic data)."""

import numpy as np
import torch

from embreg.data import RatingsData, random_split
from embreg.recipes import load_recipe
from embreg.recipes.builders import PreparedData, build_batches, build_evaluator, build_model, build_transforms
from embreg.sse import SSE


def _data(n=400, users=20, items=30, seed=0):
    rng = np.random.default_rng(seed)
    ratings = RatingsData.from_labels(rng.integers(0, users, n), rng.integers(0, items, n),
                                      rng.integers(1, 6, n).astype(np.float32))
    return PreparedData(ratings=ratings, split=random_split(n, (0.8, 0.1, 0.1), seed=0))


def test_per_table_probabilities_are_respected():
    data = _data()
    user, item = build_transforms(load_recipe("mf-sse-se", ["sse.p_user=0.3", "sse.p_item=0"]), data)
    assert isinstance(user, SSE) and user.p == 0.3 and user.num_embeddings == data.ratings.num_users
    assert item is None
    user, item = build_transforms(load_recipe("mf-sse-se", ["sse.p_user=0", "sse.p_item=0.2"]), data)
    assert user is None and item.p == 0.2 and item.num_embeddings == data.ratings.num_items
    assert build_transforms(load_recipe("mf"), data) == (None, None)


def test_user_swaps_leave_items_untouched_in_the_model():
    data = _data()
    model = build_model(load_recipe("mf-sse-se", ["sse.p_user=1.0", "sse.p_item=0"]), data)
    batch = {"user": torch.arange(10), "item": torch.arange(10), "rating": torch.ones(10)}
    out = model(batch)
    assert torch.equal(out.hidden["item_vectors"], model.item_embedding(torch.arange(10)))
    assert not torch.equal(out.hidden["user_vectors"], model.user_embedding(torch.arange(10)))


def test_rating_batches_and_evaluator_cover_the_split():
    data = _data()
    cfg = load_recipe("mf", ["train.batch_size=64"])
    batches = build_batches(cfg, data)
    seen = torch.cat([b["rating"] for b in batches.epoch(0)])
    assert seen.numel() == data.split["train"].size
    evaluator = build_evaluator(cfg, data)
    assert set(evaluator.split_names) == {"train", "valid", "test"}
    assert set(evaluator(build_model(cfg, data), "test")) == {"rmse", "mae"}


def test_ranking_batches_sample_true_negatives():
    from embreg.data import per_user_split

    rng = np.random.default_rng(1)
    ratings = RatingsData.from_labels(rng.integers(0, 15, 600), rng.integers(0, 40, 600))
    data = PreparedData(ratings=ratings, split=per_user_split(ratings.users, seed=0))
    cfg = load_recipe("bpr", ["train.batch_size=50", "train.num_negatives=2"])
    train = data.part("train")
    positives = set(zip(train.users.tolist(), train.items.tolist()))
    batches = build_batches(cfg, data)
    total = 0
    for batch in batches.epoch(0):
        total += batch["user"].numel()
        for u, j in zip(batch["user"].tolist(), batch["neg"].tolist()):
            assert (u, j) not in positives
    assert total == 2 * len(train)

"""build_run wires the per-kind index transforms, the model, and the task's batches and evaluator (synthetic data)."""

import numpy as np
import torch
from torch import nn

from embreg.data import RatingsData, per_user_split, random_split
from embreg.recipes import load_recipe
from embreg.recipes.run import BuiltRun, build_run
from embreg.regularizers.r3f import R3F
from embreg.sse import SSE
from embreg.tasks.ratings.task import PreparedRatings


def _data(n=400, users=20, items=30, seed=0):
    rng = np.random.default_rng(seed)
    ratings = RatingsData.from_labels(
        rng.integers(0, users, n), rng.integers(0, items, n), rng.integers(1, 6, n).astype(np.float32)
    )
    return PreparedRatings(ratings=ratings, split=random_split(n, (0.8, 0.1, 0.1), seed=0))


def test_per_kind_transforms_are_respected():
    data = _data()
    built = build_run(load_recipe("mf", ["index_transforms={user: {name: sse-se, p: 0.3}}"]), data)
    assert isinstance(built, BuiltRun) and built.prepared is data
    user = built.context.transforms["user"]
    assert set(built.context.transforms) == {"user"}
    assert isinstance(user, SSE) and user.p == 0.3 and user.num_embeddings == data.ratings.num_users
    assert built.model.user_transform is user and isinstance(built.model.item_transform, nn.Identity)

    built = build_run(load_recipe("mf", ["index_transforms={item: {name: sse-se, p: 0.2}}"]), data)
    item = built.context.transforms["item"]
    assert set(built.context.transforms) == {"item"}
    assert item.p == 0.2 and item.num_embeddings == data.ratings.num_items
    assert built.model.item_transform is item and isinstance(built.model.user_transform, nn.Identity)

    # the shipped SSE-SE recipe transforms both kinds; plain MF transforms none
    built = build_run(load_recipe("mf-sse-se", ["index_transforms.user.p=0.3", "index_transforms.item.p=0.2"]), data)
    assert (built.context.transforms["user"].p, built.context.transforms["item"].p) == (0.3, 0.2)
    built = build_run(load_recipe("mf"), data)
    assert built.context.transforms == {}
    assert isinstance(built.model.user_transform, nn.Identity) and isinstance(built.model.item_transform, nn.Identity)


def test_user_swaps_leave_items_untouched_in_the_model():
    model = build_run(load_recipe("mf", ["index_transforms={user: {name: sse-se, p: 1.0}}"]), _data()).model
    batch = {"user": torch.arange(10), "item": torch.arange(10), "rating": torch.ones(10)}
    out = model(batch)
    assert torch.equal(out.hidden["item_vectors"], model.item_embedding(torch.arange(10)))
    assert not torch.equal(out.hidden["user_vectors"], model.user_embedding(torch.arange(10)))


def test_rating_batches_and_evaluator_cover_the_split():
    data = _data()
    built = build_run(load_recipe("mf", ["train.batch_size=64"]), data)
    seen = torch.cat([b["rating"] for b in built.batches.epoch(0)])
    assert seen.numel() == data.split["train"].size
    assert all(b["rating"].numel() <= 64 for b in built.batches.epoch(0))
    assert set(built.evaluator.split_names) == {"train", "valid", "test"}
    assert set(built.evaluator(built.model, "test")) == {"rmse", "mae"}


def test_ranking_batches_sample_true_negatives():
    rng = np.random.default_rng(1)
    ratings = RatingsData.from_labels(rng.integers(0, 15, 600), rng.integers(0, 40, 600))
    data = PreparedRatings(ratings=ratings, split=per_user_split(ratings.users, seed=0))
    built = build_run(load_recipe("bpr", ["train.batch_size=50", "train.num_negatives=2"]), data)
    train = data.part("train")
    positives = set(zip(train.users.tolist(), train.items.tolist()))
    total = 0
    for batch in built.batches.epoch(0):
        total += batch["user"].numel()
        for u, j in zip(batch["user"].tolist(), batch["neg"].tolist()):
            assert (u, j) not in positives
    assert total == 2 * len(train)


def test_objective_and_regularizers_are_built_from_the_recipe():
    data = _data()
    built = build_run(
        load_recipe("ncf", ["regularizers=[{name: r3f, sigma: 0.001}]", "model.mlp=[8]", "model.dim=4"]), data
    )
    (r3f,) = built.regularizers
    assert isinstance(r3f, R3F) and r3f.sigma == 0.001
    assert built.context.model is built.model and built.context.objective is built.objective
    batch = {"user": torch.arange(4), "item": torch.arange(4), "rating": torch.ones(4)}
    loss, output = built.objective(built.model, batch)
    assert loss.ndim == 0 and output.predictions.shape == (4,)

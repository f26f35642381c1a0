"""Sparse embedding tables in recipes (``embeddings: {sparse: true}``) with ``train.optimizer=sparse-adam``."""

from __future__ import annotations

import math

import pytest
from torch import nn

from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run, run_single

SMALL = ["data.max_rows=3000", "train.epochs=2", "train.progress=false"]
SPARSE = ["embeddings.sparse=true", "train.optimizer=sparse-adam"]


def test_sparse_mf_trains_with_sparse_adam():
    recipe = load_recipe("mf", [*SMALL, *SPARSE])
    assert recipe.embeddings.sparse is True
    built = build_run(recipe)
    assert built.model.user_embedding.sparse and built.model.item_embedding.sparse
    metrics = run_single(recipe, None).metrics
    assert metrics["epochs_run"] == 2 and metrics["test_rmse"] < 1.4


def test_sparse_tables_with_a_dense_only_optimizer_fail_before_training():
    for optimizer in ("adam", "adamw", "amsgrad"):
        recipe = load_recipe("mf", [*SMALL, "embeddings.sparse=true", f"train.optimizer={optimizer}"])
        with pytest.raises(ConfigError, match=r"train\.optimizer=sparse-adam"):
            build_run(recipe).trainer(None)
    with pytest.raises(ConfigError, match=r"train\.optimizer=sparse-adam"):
        run_single(load_recipe("mf", [*SMALL, "embeddings.sparse=true"]), None)


def test_sparse_tables_with_sse_index_transforms():
    recipe = load_recipe("mf", [*SMALL, *SPARSE, "index_transforms.item={name: sse-se, p: 0.01}"])
    metrics = run_single(recipe, None).metrics
    assert math.isfinite(metrics["test_rmse"]) and metrics["test_rmse"] < 1.4


def test_sparse_mixed_dimension_tables_train():
    recipe = load_recipe("mf", [*SMALL, "embeddings={name: md, alpha: 0.3, num_blocks: 4, sparse: true}", SPARSE[1]])
    built = build_run(recipe)
    assert all(m.sparse for m in (built.model.user_embedding, built.model.item_embedding))
    assert not any(isinstance(m, nn.Embedding) and m.sparse for m in built.model.modules())  # biases stay dense
    metrics = run_single(recipe, None).metrics
    assert math.isfinite(metrics["test_rmse"]) and metrics["test_rmse"] < 1.4

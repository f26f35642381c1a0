"""What a finished run records beyond the trainer's metrics: sizes for every task, squared errors and the
popular/rare-third errors of rating tasks (mixed-dimension-embeddings.txt, Appendix H)."""

import numpy as np
import pytest

from embreg.recipes import load_recipe
from embreg.recipes.run import build_run, parameter_counts, run_single
from embreg.tasks.ratings.task import popularity_thirds

QUICK = ["data.max_rows=3000", "train.epochs=1", "train.progress=false"]


def test_rating_runs_record_squared_errors_and_popularity_thirds():
    metrics = run_single(load_recipe("mf", QUICK), None).metrics
    for split in ("val", "test"):
        assert metrics[f"{split}_mse"] == pytest.approx(metrics[f"{split}_rmse"] ** 2)
    for key in ("train_mse_popular", "train_mse_rare", "test_mse_popular", "test_mse_rare"):
        assert np.isfinite(metrics[key]) and metrics[key] > 0


def test_embedding_parameters_count_the_tables_not_the_biases():
    built = build_run(load_recipe("mf", QUICK + ["model.dim=8"]))
    model = built.model
    users, items = model.user_embedding.weight.shape[0], model.item_embedding.weight.shape[0]
    counts = parameter_counts(model)
    assert counts["embedding_parameters"] == 8 * (users + items)
    assert counts["model_parameters"] == 8 * (users + items) + users + items  # plus one bias per row


def test_popularity_thirds_split_the_training_mass():
    items = np.repeat(np.arange(6), [3, 3, 2, 2, 1, 1])
    popular, rare = popularity_thirds(items, 7)  # item 6 never seen in training: rare
    assert popular.tolist() == [True, False, False, False, False, False, False]
    assert rare.tolist() == [False, False, False, True, True, True, True]

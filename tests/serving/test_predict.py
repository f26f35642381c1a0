"""predict: on the original ids, equal to the evaluator's own predictions, unknown ids per the policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from embreg.errors import ConfigError, DataError
from embreg.serving import load


def _test_rows(run) -> pd.DataFrame:
    part = run.prepared.part("test")
    users = run.vocabularies["user"].labels_of(part.users)
    items = run.vocabularies["item"].labels_of(part.items)
    return pd.DataFrame({"user": users, "item": items})


def test_rating_predictions_equal_the_evaluators_on_the_test_split(trained, tmp_path: Path) -> None:
    run = load(trained("rating"))
    rows = _test_rows(run)
    file = tmp_path / "pairs.csv"
    rows.to_csv(file, index=False)
    prediction = run.predict(file)
    expected = run.evaluator.predict(run.model, "test").numpy()
    np.testing.assert_allclose(prediction.table["rating"].to_numpy(dtype=float), expected, rtol=1e-6)
    n = len(rows)
    assert prediction.summary == {"rows": n, "predicted": n, "unknown": 0, "fallback": 0, "skipped": 0, "non_finite": 0}


def test_string_ids_round_trip_unchanged(trained, tmp_path: Path) -> None:
    run = load(trained("rating"))
    file = tmp_path / "pairs.csv"
    file.write_text("user,item\n007,i03\nu05,i11\n")
    table = run.predict(file).table
    assert table["user"].tolist() == ["007", "u05"]  # the leading zeros survive
    assert table["item"].tolist() == ["i03", "i11"]
    assert (table["status"] == "ok").all()


def test_unknown_ids_follow_the_policy_and_are_counted(trained, tmp_path: Path) -> None:
    run = load(trained("rating"))
    file = tmp_path / "pairs.csv"
    file.write_text("user,item\n007,i03\nnobody,i03\n007,nothing\n7,i03\n")  # 7 is not 007
    model = run.model  # BiasedMF: mu + b_u + b_i, with the unseen side's bias left out
    user, item = (
        int(run.vocabularies[k].indices(np.array([v], dtype=object))[0]) for k, v in (("user", "007"), ("item", "i03"))
    )
    mu = float(model.global_mean)
    b_u, b_i = float(model.user_bias.weight.detach()[user, 0]), float(model.item_bias.weight.detach()[item, 0])
    filled = run.predict(file, unknown="mean")
    assert filled.table["status"].tolist() == ["ok", "mean", "mean", "mean"]
    assert filled.table["rating"].tolist()[1:] == pytest.approx([mu + b_i, mu + b_u, mu + b_i], rel=1e-6)
    assert b_u != 0 and b_i != 0
    assert filled.summary == {"rows": 4, "predicted": 1, "unknown": 3, "fallback": 3, "skipped": 0, "non_finite": 0}
    assert "3 with ids unseen in training" in filled.summary_line()
    skipped = run.predict(file, unknown="skip")
    assert skipped.table["user"].tolist() == ["007"] and skipped.summary["skipped"] == 3
    with pytest.raises(DataError, match="3 of 4 input rows hold ids never seen"):
        run.predict(file, unknown="error")
    with pytest.raises(ConfigError, match="mean, error, skip"):
        run.predict(file, unknown="zero")


def test_ml100k_integer_ids(trained) -> None:
    run = load(trained("rating-ml100k"))
    table = run.predict(pd.DataFrame({"user_id": [196, 196], "item_id": [242, 99999]})).table
    assert table["user_id"].tolist() == [196, 196] and table["status"].tolist() == ["ok", "mean"]


def test_click_probabilities_equal_the_evaluators_on_the_test_split(trained, serving_dir: Path) -> None:
    run = load(trained("ctr"))
    rows = pd.read_csv(serving_dir / "data" / "clicks.csv", dtype=str).iloc[run.prepared.split["test"]]
    prediction = run.predict(rows.drop(columns="label"))
    expected = torch.sigmoid(run.evaluator.logits(run.model, "test")).numpy()
    np.testing.assert_allclose(prediction.table["click_probability"].to_numpy(dtype=float), expected, rtol=1e-5)
    unseen = run.predict(pd.DataFrame({"site": ["s1", "s99"], "device": ["d0", "d0"], "price": ["0.1", "0.2"]}))
    assert unseen.table["status"].tolist() == ["ok", "mean"] and unseen.summary["unknown"] == 1


def test_ctr_on_a_registry_table_is_refused(tmp_path: Path) -> None:
    from embreg.recipes import load_recipe
    from embreg.recipes.run import run_single

    run_single(load_recipe("ctr-adult", ["data.max_rows=300", "train.epochs=1", "train.progress=false"]), tmp_path)
    with pytest.raises(ConfigError, match="registry table 'adult'"):
        load(tmp_path).predict(pd.DataFrame({"x": [1]}))


def test_class_and_probability_equal_the_evaluators_on_the_test_split(trained, tmp_path: Path) -> None:
    run = load(trained("classification"))
    texts = run.prepared.task.texts["test"]
    file = tmp_path / "texts.txt"
    file.write_text("\n".join(texts) + "\n")
    table = run.predict(file).table
    logits = run.evaluator.predict(run.model, "test")
    probability, index = torch.softmax(logits, dim=-1).max(dim=-1)
    names = run.prepared.task.label_names
    assert table["label"].tolist() == [names[i] for i in index.tolist()]
    np.testing.assert_allclose(table["probability"].to_numpy(dtype=float), probability.numpy(), rtol=1e-4)


def test_predict_is_refused_for_recommenders(trained) -> None:
    with pytest.raises(ConfigError, match="predict serves"):
        load(trained("ranking")).predict(pd.DataFrame())


def test_regression_values_equal_the_evaluators_on_the_test_split(trained) -> None:
    run = load(trained("regression"))
    texts = pd.DataFrame({"text": run.prepared.task.texts["test"]})
    table = run.predict(texts).table
    expected = run.evaluator.predict(run.model, "test").numpy()
    np.testing.assert_allclose(table["value"].to_numpy(dtype=float), expected, rtol=1e-4, atol=1e-6)
    assert table.columns.tolist() == ["text", "value", "status"]

"""CTR tables: the container, the adult and ML-100k views (tiny fixtures), the SYNTHETIC generator, real data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embreg.data import CTRData, load_ml100k, synthetic_ctr
from embreg.data.datasets.adult import ADULT_CATEGORICAL, ADULT_DENSE, adult_ctr
from embreg.data.datasets.movielens_ctr import ml100k_ctr
from embreg.errors import DataError
from tests.helpers.data_helpers import write_tiny_atomic


def _toy(bags: bool = False) -> CTRData:
    return CTRData(
        "toy",
        np.array([[0, 2], [1, 0], [1, 1]]),
        ("a", "b"),
        (2, 3),
        np.zeros((3, 1), np.float32),
        ("x",),
        np.array([1, 0, 1], np.float32),
        bags=np.array([[[0, 2]], [[1, 2]], [[1, 0]]]) if bags else None,
        bag_names=("g",) if bags else (),
        bag_cardinalities=(3,) if bags else (),
    )


def test_frequencies_subset_and_bag_padding():
    data = _toy(bags=True)
    freqs = data.field_frequencies()
    assert [f.tolist() for f in freqs] == [[1, 2], [1, 1, 1], [2, 2, 0]]  # padding id 2 counts 0
    part = data.subset(np.array([2]))
    assert len(part) == 1 and part.categorical.tolist() == [[1, 1]] and part.bags.tolist() == [[[1, 0]]]
    assert data.num_fields == 3 and data.bag_padding(0) == 2


def test_out_of_range_ids_are_named():
    with pytest.raises(DataError, match=r"field 'b' has ids in \[3, 3\]; valid range is \[0, 2\]"):
        CTRData(
            "bad", np.array([[0, 3]]), ("a", "b"), (2, 3), np.zeros((1, 0), np.float32), (), np.array([1], np.float32)
        )


def test_adult_view_of_a_tiny_table():
    table = pd.DataFrame(
        {c: ["x", "y", "x"] for c in ADULT_CATEGORICAL[:-1]}
        | {c: [40, 50, 40] for c in ADULT_DENSE}
        | {"income": ["<=50K", ">50K.", "<=50K"]}
    )
    data = adult_ctr(table)
    assert data.field_names == ADULT_CATEGORICAL and len(data.field_names) == 9
    assert data.cardinalities == (2,) * 9 and data.labels.tolist() == [0, 1, 0]
    assert data.dense[0, ADULT_DENSE.index("fnlwgt")] == pytest.approx(np.log1p(40))
    with pytest.raises(DataError, match="income"):
        adult_ctr(table.assign(income=["maybe", ">50K", "<=50K"]))


def test_ml100k_ctr_view_of_tiny_files(tmp_path: Path):
    ml = load_ml100k(write_tiny_atomic(tmp_path / "ml"))
    data = ml100k_ctr(ml)
    assert data.field_names == ("user", "item", "occupation", "age_bucket", "gender", "zip_prefix", "release_year")
    assert len(data) == len(ml.ratings) and data.bags.shape[:2] == (len(ml.ratings), 1)
    assert data.labels.tolist() == (ml.ratings.ratings >= 4).astype(np.float32).tolist()
    assert data.categorical[:, 0].tolist() == ml.ratings.users.tolist()
    genres_of_first = ml.items["genres"].iloc[int(ml.ratings.items[0])]
    assert (data.bags[0, 0] != data.bag_padding(0)).sum() == len(genres_of_first)


def test_synthetic_generator_is_seeded_skewed_and_labelled_synthetic():
    a = synthetic_ctr(4000, num_fields=5, max_cardinality=10_000, seed=3)
    b = synthetic_ctr(4000, num_fields=5, max_cardinality=10_000, seed=3)
    assert a.synthetic and "SYNTHETIC" in a.name
    assert np.array_equal(a.categorical, b.categorical) and np.array_equal(a.labels, b.labels)
    assert a.cardinalities[0] == 10 and a.cardinalities[-1] == 10_000
    top_share = np.bincount(a.categorical[:, -1]).max() / len(a)
    assert top_share > 0.05  # Zipf: the most popular of 10,000 values takes far more than 1/10,000
    assert 0.1 < a.labels.mean() < 0.9
    assert not np.array_equal(synthetic_ctr(4000, num_fields=5, max_cardinality=10_000, seed=4).labels, a.labels)


def test_synthetic_labels_depend_on_the_planted_interaction():
    data = synthetic_ctr(20000, num_fields=3, max_cardinality=20, rank=2, interaction_scale=3.0, seed=0)
    # the empirical click rate of the most common (x1, x2) cells spreads far beyond sampling noise
    cells = pd.DataFrame({"a": data.categorical[:, 0], "b": data.categorical[:, 1], "y": data.labels})
    rates = cells.groupby(["a", "b"])["y"].agg(["mean", "size"]).query("size > 300")["mean"]
    assert rates.max() - rates.min() > 0.2


@pytest.mark.integration
def test_real_adult_table():
    from embreg.data import load_adult

    data = load_adult()
    assert len(data) == 48_842 and data.cardinalities == (9, 16, 7, 15, 6, 5, 2, 42, 96)
    assert 0.23 < data.labels.mean() < 0.25


@pytest.mark.integration
def test_real_ml100k_ctr_table():
    from embreg.data import load_ml100k_ctr

    data = load_ml100k_ctr()
    assert len(data) == 100_000 and data.cardinalities[:2] == (943, 1682)
    assert data.bag_cardinalities == (20,) and 0.5 < data.labels.mean() < 0.6

"""MovieLens-100k as a CTR task: does a user rate a movie 4 or higher?

Every rating is one example with the single-valued fields user (943), item (1,682), occupation (21), age
bucket (7), gender (2), zip-code prefix (first three characters, 382 values), release year (71 years plus
"unknown"), the multi-valued field genres (19 genres, 1 to 6 per movie, padded), the dense features age and
release year (unknown years take the median year) and the label ``rating >= 4``. Built from the registry's
``ml-100k`` files (:func:`embreg.data.load_ml100k`).
"""

from __future__ import annotations

import numpy as np

from embreg.data.ctr import CTRData, encode_field
from embreg.data.datasets.movielens import MovieLens100k, load_ml100k

ML100K_CTR_FIELDS = ("user", "item", "occupation", "age_bucket", "gender", "zip_prefix", "release_year")
AGE_BUCKET_EDGES = (18, 25, 35, 45, 50, 56)
"""Bucket edges of MovieLens-1M's age groups: under 18, 18-24, 25-34, 35-44, 45-49, 50-55, 56 and over."""


def _genre_bags(ml: MovieLens100k) -> tuple[np.ndarray, int]:
    vocabulary = sorted({g for genres in ml.items["genres"] for g in genres})
    index = {g: i for i, g in enumerate(vocabulary)}
    padding = len(vocabulary)
    width = max(len(genres) for genres in ml.items["genres"])
    bags = np.full((ml.num_items, width), padding, dtype=np.int64)
    for item, genres in zip(ml.items["item"], ml.items["genres"]):
        bags[item, : len(genres)] = [index[g] for g in genres]
    return bags, padding + 1


def ml100k_ctr(ml: MovieLens100k, *, threshold: float = 4.0) -> CTRData:
    """The CTR view of a loaded :class:`MovieLens100k` (see the module docstring).

    Args:
        ml: the ML-100k bundle.
        threshold: ratings at or above it are positives.
    """
    users, items = ml.users.set_index("user"), ml.items.set_index("item")
    u, i = ml.ratings.users, ml.ratings.items
    age = users["age"].to_numpy()
    years = items["release_year"]
    year_known = years.fillna(int(years.median())).to_numpy(np.float64)
    user_fields = {
        "occupation": encode_field(users["occupation"].to_numpy()),
        "age_bucket": (
            np.searchsorted(AGE_BUCKET_EDGES, age, side="right").astype(np.int64),
            np.arange(len(AGE_BUCKET_EDGES) + 1),
        ),
        "gender": encode_field(users["gender"].to_numpy()),
        "zip_prefix": encode_field(users["zip_code"].str[:3].to_numpy()),
    }
    year_codes, year_vocab = encode_field(years.astype("string").fillna("unknown").to_numpy())
    columns = [u, i] + [codes[u] for codes, _ in user_fields.values()] + [year_codes[i]]
    cardinalities = [ml.num_users, ml.num_items] + [len(v) for _, v in user_fields.values()] + [len(year_vocab)]
    genre_table, genre_cardinality = _genre_bags(ml)
    dense = np.stack([age[u], year_known[i]], axis=1).astype(np.float32)
    return CTRData(
        "ml-100k-ctr",
        np.stack(columns, axis=1).astype(np.int64),
        ML100K_CTR_FIELDS,
        tuple(cardinalities),
        dense,
        ("age", "release_year"),
        (ml.ratings.ratings >= threshold).astype(np.float32),
        bags=genre_table[i][:, None, :],
        bag_names=("genres",),
        bag_cardinalities=(genre_cardinality,),
    )


def load_ml100k_ctr(*, threshold: float = 4.0) -> CTRData:
    """MovieLens-100k as a CTR table (fetches ``ml-100k`` on first use).

    Example:
        >>> data = load_ml100k_ctr()  # doctest: +SKIP
        >>> len(data), data.cardinalities, round(float(data.labels.mean()), 3)  # doctest: +SKIP
        (100000, (943, 1682, 21, 7, 2, 382, 72), 0.554)
    """
    return ml100k_ctr(load_ml100k(), threshold=threshold)

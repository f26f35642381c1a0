"""A user's data files: duplicate interactions, values beyond float32/int64, paths that are not regular files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embreg.data import load_ctr_file, load_ratings_file, load_text_file, min_split_rows, per_user_split, random_split
from embreg.data.cache import sha256_file
from embreg.data.files.duplicates import resolve_duplicates
from embreg.data.files.ratings_file import read_ratings_file
from embreg.data.files.user_files import describe_file
from embreg.errors import DataError


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


DUPLICATED = (
    "user_id,item_id,rating\n"
    "u1,i1,4\n"  # line 2
    "u2,i1,5\n"  # line 3
    "u1,i1,2\n"  # line 4: (u1, i1) again
    "u3,i2,3\n"  # line 5
    "u2,i1,1\n"  # line 6: (u2, i1) again
    "u2,i1,3\n"  # line 7: and again
)


# ----- duplicates ----------------------------------------------------------------------------------------------


def test_duplicate_pairs_are_refused_with_their_count_and_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", DUPLICATED)
    with pytest.raises(DataError) as info:
        load_ratings_file(path)
    message = str(info.value)
    assert str(path) in message
    assert "3 duplicate (user, item) rows" in message and "2 (user, item) occur more than once" in message
    assert "(user 'u1', item 'i1') at lines 2, 4" in message
    assert "(user 'u2', item 'i1') at lines 3, 6, 7" in message
    assert "first, last or mean" in message


def test_only_the_first_few_duplicates_are_listed(tmp_path: Path) -> None:
    rows = "".join(f"{u},{u},1\n{u},{u},2\n" for u in range(12))
    with pytest.raises(DataError, match=r"12 duplicate .*; 7 more\. Remove them"):
        load_ratings_file(write(tmp_path / "r.csv", "user_id,item_id,rating\n" + rows))


@pytest.mark.parametrize(
    ("policy", "ratings"),
    [
        # kept rows in file order: (u1,i1) (u2,i1) (u3,i2), each with the policy's value
        ("first", {("u1", "i1"): 4.0, ("u2", "i1"): 5.0, ("u3", "i2"): 3.0}),
        ("last", {("u1", "i1"): 2.0, ("u2", "i1"): 3.0, ("u3", "i2"): 3.0}),
        ("mean", {("u1", "i1"): 3.0, ("u2", "i1"): 3.0, ("u3", "i2"): 3.0}),
    ],
)
def test_each_policy_resolves_duplicates(tmp_path: Path, policy: str, ratings: dict) -> None:
    data, counts = read_ratings_file(write(tmp_path / "r.csv", DUPLICATED), duplicates=policy)
    got = {(data.user_ids[u], data.item_ids[i]): float(r) for u, i, r in zip(data.users, data.items, data.ratings)}
    assert got == ratings
    assert len(data) == 3 and counts == {"rows_read": 6, "duplicates_removed": 3}


def test_last_keeps_each_pair_at_its_last_row() -> None:
    keys = [np.array(["a", "b", "a"], dtype=object), np.array([1, 1, 1])]
    kept, values = resolve_duplicates(keys, np.array([1.0, 2.0, 3.0]), "last", lambda i: f"line {i + 2}")
    assert kept.tolist() == [1, 2] and values.tolist() == [2.0, 3.0]


def test_mean_is_refused_where_rows_hold_no_value(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", DUPLICATED)
    with pytest.raises(DataError, match="'mean' averages ratings.*use 'first' or 'last'"):
        load_ratings_file(path, rating=None, duplicates="mean")
    with pytest.raises(DataError, match="duplicates='often' is not a duplicate policy; choose one of error, first"):
        load_ratings_file(path, duplicates="often")


def test_implicit_duplicates_are_refused_too(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="3 duplicate"):
        load_ratings_file(write(tmp_path / "r.csv", DUPLICATED), rating=None)
    assert len(load_ratings_file(tmp_path / "r.csv", rating=None, duplicates="first")) == 3


def test_parquet_duplicates_name_rows(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pd.DataFrame({"user_id": [1, 2, 1], "item_id": [5, 5, 5], "rating": [1.0, 2.0, 3.0]}).to_parquet(path)
    with pytest.raises(DataError, match=r"\(user 1, item 5\) at rows 1, 3"):
        load_ratings_file(path)


@pytest.mark.parametrize("seed", range(5))
def test_no_pair_lands_on_both_sides_of_a_split_after_resolution(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    users, items = rng.integers(0, 15, 600), rng.integers(0, 20, 600)  # about half of the rows repeat a pair
    lines = "".join(f"{u},{i},{r}\n" for u, i, r in zip(users, items, rng.integers(1, 6, 600)))
    path = write(tmp_path / "r.csv", "user_id,item_id,rating\n" + lines)
    with pytest.raises(DataError, match="duplicate"):
        load_ratings_file(path)
    for policy in ("first", "last", "mean"):
        data = load_ratings_file(path, duplicates=policy)
        pairs = data.users * data.num_items + data.items
        assert len(np.unique(pairs)) == len(data)
        for split in (random_split(len(data), seed=seed), per_user_split(data.users, seed=seed)):
            parts = [set(pairs[split[name]].tolist()) for name in ("train", "valid", "test")]
            assert not (parts[0] & parts[1]) and not (parts[0] & parts[2]) and not (parts[1] & parts[2])


def test_next_item_duplicates_are_the_same_user_item_and_timestamp(tmp_path: Path) -> None:
    text = "user,item,ts\nu1,a,1\nu1,b,2\nu1,a,3\nu1,b,2\nu2,a,1\n"  # (u1, b, 2) twice; (u1, a) at two times
    path = write(tmp_path / "seq.csv", text)
    options = {"user": "user", "item": "item", "rating": None, "timestamp": "ts", "duplicates_per_timestamp": True}
    with pytest.raises(
        DataError,
        match=r"1 duplicate \(user, item, timestamp\) rows.*\(user 'u1', item 'b', "
        r"timestamp 2\) at lines 3, 5",
    ):
        load_ratings_file(path, **options)
    data = load_ratings_file(path, duplicates="last", **options)
    assert len(data) == 4 and data.timestamps.tolist() == [1, 3, 2, 1]
    with pytest.raises(DataError, match="needs the timestamp column"):
        load_ratings_file(path, user="user", item="item", rating=None, duplicates_per_timestamp=True)


# ----- values beyond float32 / int64 ---------------------------------------------------------------------------


def test_a_rating_beyond_float32_is_refused_with_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", "user_id,item_id,rating\n1,1,4\n2,1,1e300\n")
    with pytest.raises(DataError, match=r"r\.csv: line 3, column 'rating': rating '1e300' overflows float32"):
        load_ratings_file(path)
    assert load_ratings_file(write(tmp_path / "ok.csv", "user_id,item_id,rating\n1,1,3e38\n")).ratings[0] > 1e38


def test_a_parquet_rating_beyond_float32_names_its_row(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pd.DataFrame({"user_id": [1, 2], "item_id": [1, 1], "rating": [4.0, -1e300]}).to_parquet(path)
    with pytest.raises(DataError, match=r"row 2, column 'rating': rating -1e\+300 overflows float32"):
        load_ratings_file(path)


def test_a_timestamp_beyond_int64_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", "user_id,item_id,rating,ts\n1,1,4,5\n2,1,3,1e300\n")
    with pytest.raises(DataError, match=r"line 3, column 'ts': timestamp '1e300' overflows int64"):
        load_ratings_file(path, timestamp="ts")


def test_dense_ctr_values_and_regression_labels_beyond_float32_are_refused(tmp_path: Path) -> None:
    clicks = write(tmp_path / "c.csv", "label,site,price\n1,a,0.5\n0,b,1e300\n")
    with pytest.raises(DataError, match=r"c\.csv: line 3, column 'price': dense value '1e300' overflows float32"):
        load_ctr_file(clicks, dense_cols=["price"])
    texts = write(tmp_path / "t.csv", "text,label\na,1\nb,2\nc,1e39\nd,4\n")
    with pytest.raises(DataError, match=r"t\.csv: line 4, column 'label': label '1e39' overflows float32"):
        load_text_file(texts, kind="regression")


# ----- paths that are not regular files ------------------------------------------------------------------------


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.csv"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("load", "what"),
    [(load_ratings_file, "ratings file"), (load_ctr_file, "click file"), (load_text_file, "text file")],
)
def test_a_directory_or_fifo_is_not_a_regular_file(tmp_path: Path, load, what: str) -> None:
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    with pytest.raises(DataError, match=f"{what} .*folder.csv is not a regular file \\(it is a directory\\)"):
        load(folder)
    if hasattr(os, "mkfifo"):  # a FIFO would block a reader that opened it
        with pytest.raises(DataError, match=f"{what} .*pipe.csv is not a regular file \\(it is a FIFO\\)"):
            load(_fifo(tmp_path))
    with pytest.raises(DataError, match=f"{what} .*absent.csv does not exist"):
        load(tmp_path / "absent.csv")


def test_a_device_is_not_a_regular_file() -> None:
    if not Path("/dev/null").exists():
        pytest.skip("no /dev/null")
    with pytest.raises(DataError, match="/dev/null is not a regular file \\(it is a character device\\)"):
        load_ratings_file("/dev/null")


def test_describe_file_gives_the_resolved_path_size_and_sha256(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", "user_id,item_id\n1,2\n")
    record = describe_file(tmp_path / "." / "r.csv")
    assert record == {"path": str(path.resolve()), "bytes": 20, "sha256": sha256_file(path)}
    assert record["sha256"] == "7b2b4f3c745864635b82d95625509d36d08bb90c71804bcb6fb16ea3c04cedc2"


# ----- the rows a split needs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fractions", [(0.8, 0.1, 0.1), (0.6, 0.2, 0.2), (0.5, 0.25, 0.25), (0.98, 0.01, 0.01)])
def test_min_split_rows_is_the_fewest_rows_with_no_empty_part(fractions) -> None:
    n = min_split_rows(fractions)
    assert all(random_split(n, fractions, seed=0)[k].size for k in ("train", "valid", "test"))
    assert not all(random_split(n - 1, fractions, seed=0)[k].size for k in ("train", "valid", "test"))

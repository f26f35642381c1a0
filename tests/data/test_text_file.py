"""load_text_file: CSV, TSV and parquet round trips, label mapping, splits, and every malformed case."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embreg.data import TextTask, load_text_file
from embreg.data.labelled_text import SPLITS
from embreg.errors import DataError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def frame(n: int = 50, labels: list | None = None) -> pd.DataFrame:
    labels = labels if labels is not None else [["neg", "pos", "mixed"][i % 3] for i in range(n)]
    return pd.DataFrame({"text": [f"review number {i}" for i in range(n)], "label": labels})


def all_rows(task: TextTask) -> dict[str, object]:
    """text -> label over every split (texts are unique in these tests)."""
    out: dict[str, object] = {}
    for split in SPLITS:
        for text, label in zip(task.texts[split], task.labels[split].tolist()):
            assert text not in out
            out[text] = label
    return out


def test_csv_round_trip_maps_string_labels_sorted(tmp_path: Path) -> None:
    df = frame(50)
    path = tmp_path / "my reviews.csv"
    df.to_csv(path, index=False)
    task = load_text_file(path, valid_size=10, test_size=10)
    assert isinstance(task, TextTask)
    assert task.name == "file-my reviews" and task.kind == "classification"
    assert task.label_names == ("mixed", "neg", "pos") and task.num_labels == 3
    assert task.sizes == {"train": 30, "valid": 10, "test": 10}
    assert all(task.labels[s].dtype == np.int64 for s in SPLITS)
    ids = {"mixed": 0, "neg": 1, "pos": 2}
    assert all_rows(task) == {t: ids[lab] for t, lab in zip(df["text"], df["label"])}
    assert task.record == {
        "dataset": "file",
        "path": str(path),
        "text_col": "text",
        "label_col": "label",
        "kind": "classification",
        "split_seed": 0,
        "subset_seed": 0,
        "sizes": {"train": 30, "valid": 10, "test": 10},
        "eval_shrunk": False,
        "label_names": ["mixed", "neg", "pos"],
    }


def test_tsv_round_trip_with_other_column_names(tmp_path: Path) -> None:
    df = frame(20).rename(columns={"text": "body", "label": "y"})
    for suffix in (".tsv", ".tab", ".txt"):
        path = tmp_path / f"data{suffix}"
        df.to_csv(path, sep="\t", index=False)
        task = load_text_file(path, text_col="body", label_col="y", valid_size=3, test_size=3)
        assert task.name == "file-data" and task.sizes == {"train": 14, "valid": 3, "test": 3}
        assert set(all_rows(task)) == set(df["body"])


def test_explicit_sep_overrides_the_extension(tmp_path: Path) -> None:
    path = write(tmp_path / "data.txt", "text;label\n" + "".join(f"t{i};{i % 2}\n" for i in range(10)))
    task = load_text_file(path, sep=";", valid_size=2, test_size=2)
    assert task.label_names == ("0", "1") and task.sizes["train"] == 6


def test_quoted_csv_texts_with_commas_and_newlines(tmp_path: Path) -> None:
    path = write(tmp_path / "q.csv", 'text,label\n"good, really",1\n"two\nlines",0\nplain,1\nfine,0\n')
    task = load_text_file(path, valid_size=1, test_size=1)
    assert set(all_rows(task)) == {"good, really", "two\nlines", "plain", "fine"}


def test_parquet_round_trip(tmp_path: Path) -> None:
    df = frame(30)
    path = tmp_path / "data.parquet"
    df.to_parquet(path)
    task = load_text_file(path, valid_size=5, test_size=5)
    assert task.label_names == ("mixed", "neg", "pos") and task.sizes == {"train": 20, "valid": 5, "test": 5}
    ids = {"mixed": 0, "neg": 1, "pos": 2}
    assert all_rows(task) == {t: ids[lab] for t, lab in zip(df["text"], df["label"])}
    pq_path = tmp_path / "data.pq"
    df.to_parquet(pq_path)
    assert load_text_file(pq_path, valid_size=5, test_size=5).sizes == task.sizes


def test_integer_labels_sort_numerically(tmp_path: Path) -> None:
    labels = [[10, 2, -1][i % 3] for i in range(30)]
    df = frame(30, labels)
    df.to_csv(tmp_path / "ints.csv", index=False)
    df.to_parquet(tmp_path / "ints.parquet")
    for name in ("ints.csv", "ints.parquet"):
        task = load_text_file(tmp_path / name, valid_size=5, test_size=5)
        assert task.label_names == ("-1", "2", "10")  # numeric order, not "-1" < "10" < "2"
        ids = {-1: 0, 2: 1, 10: 2}
        assert all_rows(task) == {t: ids[lab] for t, lab in zip(df["text"], labels)}


def test_numeric_string_mix_sorts_as_strings(tmp_path: Path) -> None:
    path = write(tmp_path / "mix.csv", "text,label\na,10\nb,2\nc,x\nd,10\ne,x\n")
    task = load_text_file(path, valid_size=1, test_size=1)
    assert task.label_names == ("10", "2", "x")


def test_regression(tmp_path: Path) -> None:
    targets = [float(i) / 4 for i in range(20)]
    df = frame(20, targets)
    for name, write_frame in (("r.csv", lambda p: df.to_csv(p, index=False)), ("r.parquet", df.to_parquet)):
        write_frame(tmp_path / name)
        task = load_text_file(tmp_path / name, kind="regression", valid_size=4, test_size=4)
        assert task.kind == "regression" and task.num_labels == 1 and task.label_names == ()
        assert all(task.labels[s].dtype == np.float32 for s in SPLITS)
        assert all_rows(task) == dict(zip(df["text"], targets))
        assert "label_names" not in task.record and task.record["kind"] == "regression"


def test_split_determinism_and_seeds(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    frame(100).to_csv(path, index=False)
    kw = {"valid_size": 10, "test_size": 15, "train_size": 20}
    a, b = load_text_file(path, **kw), load_text_file(path, **kw)
    assert a.texts == b.texts and a.sizes == {"train": 20, "valid": 10, "test": 15}
    other_subset = load_text_file(path, subset_seed=1, **kw)
    assert other_subset.texts["valid"] == a.texts["valid"] and other_subset.texts["test"] == a.texts["test"]
    assert other_subset.texts["train"] != a.texts["train"]
    other_split = load_text_file(path, split_seed=1, **kw)
    assert other_split.texts["test"] != a.texts["test"]
    assert other_split.record["split_seed"] == 1 and other_subset.record["subset_seed"] == 1


def test_training_subsets_are_nested(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    frame(200).to_csv(path, index=False)
    previous: set[str] = set()
    for size in (10, 25, 50, 100, None):
        task = load_text_file(path, train_size=size, valid_size=20, test_size=20, subset_seed=3)
        train = set(task.texts["train"])
        assert len(train) == (size or 160) and previous <= train
        assert not train & set(task.texts["valid"]) and not train & set(task.texts["test"])
        previous = train


def test_small_file_shrinks_evaluation_sets(tmp_path: Path) -> None:
    path = tmp_path / "small.csv"
    frame(25).to_csv(path, index=False)
    task = load_text_file(path)  # defaults ask for 1000 + 1000
    assert task.sizes == {"train": 21, "valid": 2, "test": 2}
    assert task.record["eval_shrunk"] is True
    assert task.record["requested_sizes"] == {"valid": 1000, "test": 1000}
    assert task.record["sizes"] == task.sizes
    tiny = tmp_path / "tiny.csv"
    frame(3).to_csv(tiny, index=False)
    assert load_text_file(tiny).sizes == {"train": 1, "valid": 1, "test": 1}


# ----- errors -----------------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nope.csv.*does not exist"):
        load_text_file(tmp_path / "nope.csv")


def test_missing_text_column_lists_columns_and_suggests(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "texts,label\na,1\nb,0\nc,1\n")
    with pytest.raises(DataError) as info:
        load_text_file(path)
    message = str(info.value)
    assert str(path) in message and "'text'" in message and "['texts', 'label']" in message
    assert "closest match: 'texts'" in message


def test_missing_label_column_lists_columns_and_suggests(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pd.DataFrame({"text": ["a", "b", "c"], "labels": [1, 0, 1]}).to_parquet(path)
    with pytest.raises(DataError) as info:
        load_text_file(path)
    message = str(info.value)
    assert str(path) in message and "'label'" in message and "['text', 'labels']" in message
    assert "closest match: 'labels'" in message


@pytest.mark.parametrize(
    "body, where",
    [
        ("a,1\n,0\nc,1\n", "line 3"),
        ("a,1\nb,0\n   ,1\n", "line 4"),
        ('a,1\nb,0\n"",1\n', "line 4"),
    ],
)
def test_empty_text_in_csv_names_line_and_column(tmp_path: Path, body: str, where: str) -> None:
    path = write(tmp_path / "d.csv", "text,label\n" + body)
    with pytest.raises(DataError, match=rf"d\.csv: {where}, column 'text': (empty|missing) text"):
        load_text_file(path)


def test_missing_text_in_parquet_names_row(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pd.DataFrame({"text": ["a", None, "c"], "label": [1, 0, 1]}).to_parquet(path)
    with pytest.raises(DataError, match=r"d\.parquet: row 2, column 'text': missing text"):
        load_text_file(path)
    pd.DataFrame({"text": ["a", "b", " "], "label": [1, 0, 1]}).to_parquet(path)
    with pytest.raises(DataError, match=r"d\.parquet: row 3, column 'text': empty text"):
        load_text_file(path)


@pytest.mark.parametrize("kind", ["classification", "regression"])
def test_missing_label_in_csv(tmp_path: Path, kind: str) -> None:
    path = write(tmp_path / "d.csv", "text,label\na,1\nb,\nc,1\n")
    with pytest.raises(DataError, match=r"d\.csv: line 3, column 'label': (empty|missing) label"):
        load_text_file(path, kind=kind)
    write(path, "text,label\na,1\nb,0\nc,NA\n")
    with pytest.raises(DataError, match=r"d\.csv: line 4, column 'label': (missing label|label is NaN)"):
        load_text_file(path, kind=kind)


@pytest.mark.parametrize("kind", ["classification", "regression"])
def test_missing_label_in_parquet(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "d.parquet"
    pd.DataFrame({"text": ["a", "b", "c"], "label": [1.0, 0.0, np.nan]}).to_parquet(path)
    with pytest.raises(DataError, match=r"d\.parquet: row 3, column 'label': (missing label|label is NaN)"):
        load_text_file(path, kind=kind)


def test_non_numeric_regression_label(tmp_path: Path) -> None:
    path = write(tmp_path / "d.tsv", "text\tlabel\na\t1.5\nb\tgood\nc\t2\n")
    with pytest.raises(DataError, match=r"d\.tsv: line 3, column 'label': label 'good' is not a number"):
        load_text_file(path, kind="regression")


def test_single_class_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "text,label\na,pos\nb,pos\nc,pos\n")
    with pytest.raises(DataError, match=r"d\.csv: column 'label' has 1 distinct label.*at least 2"):
        load_text_file(path)


def test_too_few_rows(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "text,label\na,1\nb,0\n")
    with pytest.raises(DataError, match=r"d\.csv has 2 data row\(s\); at least 3"):
        load_text_file(path)
    write(path, "text,label\n")
    with pytest.raises(DataError, match=r"d\.csv has a header but no data rows"):
        load_text_file(path)


def test_train_size_too_large_names_file(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    frame(30).to_csv(path, index=False)
    with pytest.raises(DataError, match=r"d\.csv \(30 rows\).*train_size=100"):
        load_text_file(path, train_size=100, valid_size=5, test_size=5)


def test_malformed_files(tmp_path: Path) -> None:
    empty = write(tmp_path / "empty.csv", "")
    with pytest.raises(DataError, match=r"empty\.csv is empty"):
        load_text_file(empty)
    ragged = write(tmp_path / "ragged.csv", "text,label\na,1\nb,0,extra\nc,1\n")
    with pytest.raises(DataError, match=r"ragged\.csv: line 3 has 3 fields"):
        load_text_file(ragged)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("text,label\ncaf\xe9,1\nb,0\nc,1\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin\.csv: line 2 is not UTF-8 text \(byte 0xe9\)"):
        load_text_file(latin)
    bad_parquet = write(tmp_path / "bad.parquet", "this is not parquet")
    with pytest.raises(DataError, match=r"bad\.parquet is not a readable parquet file"):
        load_text_file(bad_parquet)
    empty_parquet = write(tmp_path / "empty.parquet", "")
    with pytest.raises(DataError, match=r"empty\.parquet is empty"):
        load_text_file(empty_parquet)


def test_bad_arguments(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    frame(10).to_csv(path, index=False)
    with pytest.raises(DataError, match="kind='ranking'"):
        load_text_file(path, kind="ranking")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="text_col and label_col are both 'text'"):
        load_text_file(path, label_col="text")

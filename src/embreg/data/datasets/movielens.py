"""MovieLens 100k with side information: ratings, item and user attributes, and a Freebase knowledge graph.

The files are RecBole's atomic files (tab-separated, typed headers such as
``user_id:token``), fetched by ``fetch("ml-100k")``. Users and items are numbered
by their original integer ids in ascending order, so index ``k`` is id ``k + 1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from embreg.data.files.ratings_file import load_ratings_file, parse_labels, parse_numbers
from embreg.data.files.tables import Table, read_text_table
from embreg.data.ratings import RatingsData, encode_labels
from embreg.data.registry import fetch
from embreg.errors import DataError

ML100K_NAME = "ml-100k"


@dataclass(frozen=True)
class MovieLens100k:
    """The ML-100k bundle; every table uses the same 0-based user and item indices as ``ratings``.

    Attributes:
        ratings: 100,000 ratings in 1..5 with timestamps.
        items: one row per item: ``item`` (index), ``item_id`` (original), ``title``,
            ``release_year`` (nullable Int64), ``genres`` (list of str).
        users: one row per user: ``user`` (index), ``user_id``, ``age`` (int64),
            ``gender``, ``occupation``, ``zip_code`` (str).
        kg: knowledge-graph triples ``head``, ``relation``, ``tail`` (Freebase ids and relation names).
        link: ``item`` (index) and its Freebase ``entity``; about 1,600 of the 1,682 items are linked.
    """

    ratings: RatingsData
    items: pd.DataFrame
    users: pd.DataFrame
    kg: pd.DataFrame
    link: pd.DataFrame

    @property
    def num_users(self) -> int:
        return self.ratings.num_users

    @property
    def num_items(self) -> int:
        return self.ratings.num_items


def _atomic(path: Path, columns: list[str]) -> Table:
    """Read ``columns`` (by name, typed headers allowed) of an atomic file."""
    return read_text_table(path, [(name, name) for name in columns], "\t", quoted=False)


def _text(table: Table, position: int) -> np.ndarray:
    """The stripped strings of the ``position``-th requested column."""
    return table.columns[table.names[position]].str.strip().to_numpy(dtype=object)


def _load_items(path: Path) -> tuple[pd.DataFrame, np.ndarray]:
    table = _atomic(path, ["item_id", "movie_title", "release_year", "class"])
    labels = parse_labels(table, table.names[0], "item id")
    index, vocabulary = encode_labels(labels)
    if len(vocabulary) != len(labels):
        raise DataError(f"{path}: item ids are not unique ({len(labels)} rows, {len(vocabulary)} distinct ids)")
    # RecBole writes a placeholder ("unkonwn") where the year is unknown: kept as <NA>.
    years = pd.to_numeric(pd.Series(_text(table, 2)), errors="coerce").astype("Int64")
    items = pd.DataFrame(
        {
            "item": index,
            "item_id": labels,
            "title": _text(table, 1),
            "release_year": years,
            "genres": [value.split() for value in _text(table, 3)],
        }
    )
    return items.sort_values("item", ignore_index=True), vocabulary


def _load_users(path: Path) -> tuple[pd.DataFrame, np.ndarray]:
    table = _atomic(path, ["user_id", "age", "gender", "occupation", "zip_code"])
    labels = parse_labels(table, table.names[0], "user id")
    index, vocabulary = encode_labels(labels)
    if len(vocabulary) != len(labels):
        raise DataError(f"{path}: user ids are not unique ({len(labels)} rows, {len(vocabulary)} distinct ids)")
    users = pd.DataFrame(
        {
            "user": index,
            "user_id": labels,
            "age": parse_numbers(table, table.names[1], "age").astype(np.int64),
            "gender": _text(table, 2),
            "occupation": _text(table, 3),
            "zip_code": _text(table, 4),
        }
    )
    return users.sort_values("user", ignore_index=True), vocabulary


def _load_link(path: Path, item_vocabulary: np.ndarray) -> pd.DataFrame:
    table = _atomic(path, ["item_id", "entity_id"])
    labels = parse_labels(table, table.names[0], "item id")
    try:
        index, _ = encode_labels(labels, item_vocabulary)
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from exc
    return pd.DataFrame({"item": index, "entity": _text(table, 1)})


def load_ml100k(path: str | Path | None = None) -> MovieLens100k:
    """Load MovieLens 100k from a directory of RecBole atomic files (fetched when ``path`` is None).

    Args:
        path: directory holding ``ml-100k.inter``, ``.item``, ``.user``, ``.kg`` and ``.link``;
            None uses ``fetch("ml-100k")`` (cached after the first call).

    Returns:
        :class:`MovieLens100k` with 943 users and 1,682 items.

    Raises:
        DataError: a file is missing or malformed (file, line and column named).

    Example:
        >>> ml = load_ml100k()  # doctest: +SKIP
        >>> len(ml.ratings), ml.num_users, ml.num_items  # doctest: +SKIP
        (100000, 943, 1682)
    """
    directory = fetch(ML100K_NAME) if path is None else Path(path)
    files = {suffix: directory / f"{ML100K_NAME}.{suffix}" for suffix in ("inter", "item", "user", "kg", "link")}
    missing = [p.name for p in files.values() if not p.is_file()]
    if missing:
        raise DataError(f"{directory} lacks {missing}; run embreg.data.fetch('ml-100k') or pass its directory")
    items, item_vocabulary = _load_items(files["item"])
    users, user_vocabulary = _load_users(files["user"])
    ratings = load_ratings_file(
        files["inter"],
        rating="rating",
        timestamp="timestamp",
        sep="\t",
        user_ids=user_vocabulary,
        item_ids=item_vocabulary,
    )
    kg_table = _atomic(files["kg"], ["head_id", "relation_id", "tail_id"])
    kg = pd.DataFrame({"head": _text(kg_table, 0), "relation": _text(kg_table, 1), "tail": _text(kg_table, 2)})
    link = _load_link(files["link"], item_vocabulary)
    return MovieLens100k(ratings=ratings, items=items, users=users, kg=kg, link=link)

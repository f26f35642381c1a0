"""Item and user graphs on a tiny synthetic ML-100k, and the co-occurrence core against brute force."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from embreg.data import (
    MovieLens100k,
    cooccurrence_edges,
    graph_summary,
    item_graph_from_genres,
    item_graph_from_kg,
    load_ml100k,
    user_graph_from_attributes,
)
from embreg.errors import DataError
from tests.helpers.data_helpers import write_tiny_atomic


@pytest.fixture
def tiny(tmp_path: Path) -> MovieLens100k:
    return load_ml100k(write_tiny_atomic(tmp_path / "ml"))


def pairs(edges: np.ndarray) -> list[tuple[int, int]]:
    assert edges.dtype == np.int64 and edges.ndim == 2 and edges.shape[1] == 2
    return [tuple(e) for e in edges.tolist()]


def test_default_relations_link_shared_cast_and_crew_in_both_directions(tiny: MovieLens100k) -> None:
    # actor a1: items 0,1 (film as head); director d1: items 1,2 (film as tail); producer p1: 0,1,2.
    assert pairs(item_graph_from_kg(tiny)) == [(0, 1), (0, 2), (1, 2)]


def test_single_relations(tiny: MovieLens100k) -> None:
    assert pairs(item_graph_from_kg(tiny, ("film.film.directed_by",))) == [(1, 2)]
    assert pairs(item_graph_from_kg(tiny, ("film.director.film",))) == [(1, 2)]
    assert pairs(item_graph_from_kg(tiny, ("film.film.genre",))) == [(0, 3)]
    assert pairs(item_graph_from_kg(tiny, ("film.film.sequel",))) == [(2, 3)]


def test_hub_entities_can_be_skipped(tiny: MovieLens100k) -> None:
    assert pairs(item_graph_from_kg(tiny, max_entity_items=2)) == [(0, 1), (1, 2)]


def test_unknown_relation_names_the_closest(tiny: MovieLens100k) -> None:
    with pytest.raises(
        DataError, match="'film.film.directd_by' is not in the knowledge graph; closest: 'film.film.directed_by'"
    ):
        item_graph_from_kg(tiny, ("film.film.directd_by",))
    with pytest.raises(DataError, match="relations is empty"):
        item_graph_from_kg(tiny, ())


def test_genre_graph(tiny: MovieLens100k) -> None:
    # genres: 0 {Action, Comedy}, 1 {Action}, 2 {Comedy, Drama}, 3 {unknown}, 4 {Drama, Comedy}
    assert pairs(item_graph_from_genres(tiny)) == [(0, 1), (0, 2), (0, 4), (2, 4)]
    assert pairs(item_graph_from_genres(tiny, min_shared=2)) == [(2, 4)]
    with pytest.raises(DataError, match="min_shared=0 must be >= 1"):
        item_graph_from_genres(tiny, min_shared=0)


def test_user_graph_from_attributes(tiny: MovieLens100k) -> None:
    # users: 0 (24, M, student), 1 (27, F, student), 2 (45, M, engineer), 3 (41, F, engineer)
    assert pairs(user_graph_from_attributes(tiny)) == [(0, 1), (2, 3)]
    assert pairs(user_graph_from_attributes(tiny, ("gender",))) == [(0, 2), (1, 3)]
    assert pairs(user_graph_from_attributes(tiny, ("occupation", "gender"))) == []
    assert pairs(user_graph_from_attributes(tiny, ("age",))) == [(0, 1), (2, 3)]
    assert pairs(user_graph_from_attributes(tiny, ("age",), age_bucket=5)) == []
    with pytest.raises(DataError, match="unknown attributes \\['shoe_size'\\]"):
        user_graph_from_attributes(tiny, ("shoe_size",))


def test_cooccurrence_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    members, groups = rng.integers(0, 25, 120), rng.integers(0, 15, 120)
    for min_shared, max_size in [(1, None), (2, None), (1, 6)]:
        sets = {g: set(members[groups == g].tolist()) for g in set(groups.tolist())}
        if max_size is not None:
            sets = {g: s for g, s in sets.items() if len(s) <= max_size}
        expected = [
            (i, j)
            for i, j in itertools.combinations(range(25), 2)
            if sum(i in s and j in s for s in sets.values()) >= min_shared
        ]
        got = cooccurrence_edges(members, groups, 25, min_shared=min_shared, max_group_size=max_size)
        assert pairs(got) == expected


def test_empty_membership_gives_no_edges() -> None:
    assert cooccurrence_edges(np.array([], np.int64), np.array([]), 4).shape == (0, 2)


def test_graph_summary() -> None:
    summary = graph_summary(np.array([[0, 1], [1, 2], [2, 3]]), 4)
    assert (summary.num_edges, summary.average_degree, summary.density) == (3, 1.5, 0.5)

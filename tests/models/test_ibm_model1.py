"""IBM Model 1 (embreg.models.ibm_model1): EM steps computed by hand, a slow loop reference, word-by-word output."""

from __future__ import annotations

import random
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest

from embreg.errors import ConfigError, DataError
from embreg.models.ibm_model1 import NULL_WORD, cooccurrence_links, fit_ibm_model1

HOUSE_BOOK = [("das Haus", "the house"), ("das Buch", "the book")]


def test_one_em_step_from_uniform_matches_the_hand_computation() -> None:
    # uniform t = 1/3 over {the, house, book}: every link of a target word has posterior 1/(l + 1) = 1/3, so
    # c(e, f) = co-occurrences / 3 and t(e | f) = that normalised per f
    model = fit_ibm_model1(HOUSE_BOOK, iterations=1)
    expected = {
        ("the", NULL_WORD): Fraction(1, 2),
        ("house", NULL_WORD): Fraction(1, 4),
        ("book", NULL_WORD): Fraction(1, 4),
        ("the", "das"): Fraction(1, 2),
        ("house", "das"): Fraction(1, 4),
        ("the", "Haus"): Fraction(1, 2),
        ("house", "Haus"): Fraction(1, 2),
        ("book", "Buch"): Fraction(1, 2),
    }
    for (e, f), value in expected.items():
        assert model.t(e, f) == pytest.approx(float(value), abs=1e-12), (e, f)
    assert model.t("book", "Haus") == 0.0  # never co-occur


def test_the_second_em_step_matches_the_hand_computation() -> None:
    # pair 1, e = house: t(house|NULL) = t(house|das) = 1/4, t(house|Haus) = 1/2 -> posteriors 1/4, 1/4, 1/2;
    # e = the: 1/2 each -> 1/3 each. c(the|Haus) = 1/3, c(house|Haus) = 1/2 -> t(house|Haus) = 3/5;
    # c(the|das) = 2/3, c(house|das) = c(book|das) = 1/4 -> t(the|das) = 4/7, t(book|das) = 3/14
    model = fit_ibm_model1(HOUSE_BOOK, iterations=2)
    assert model.t("house", "Haus") == pytest.approx(3 / 5, abs=1e-12)
    assert model.t("the", "Haus") == pytest.approx(2 / 5, abs=1e-12)
    assert model.t("the", "das") == pytest.approx(4 / 7, abs=1e-12)
    assert model.t("book", "das") == pytest.approx(3 / 14, abs=1e-12)
    assert model.t("book", NULL_WORD) == pytest.approx(3 / 14, abs=1e-12)


def _slow_model1(pairs, iterations: int) -> dict[tuple[str, str], float]:
    """Brown et al.'s EM written as loops over sentences and positions (the obvious implementation)."""
    targets = {e for _, t in pairs for e in t.split()}
    t = defaultdict(lambda: 1.0 / len(targets))
    for _ in range(iterations):
        counts: dict[tuple[str, str], float] = defaultdict(float)
        totals: dict[str, float] = defaultdict(float)
        for source, target in pairs:
            side = [NULL_WORD, *source.split()]
            for e in target.split():
                z = sum(t[(e, f)] for f in side)
                for f in side:
                    counts[(e, f)] += t[(e, f)] / z
                    totals[f] += t[(e, f)] / z
        t = defaultdict(float, {(e, f): c / totals[f] for (e, f), c in counts.items()})
    return dict(t)


def test_vectorised_em_equals_the_loop_reference_with_repeated_words() -> None:
    rng = random.Random(3)
    words, targets = [f"s{i}" for i in range(9)], [f"t{i}" for i in range(7)]
    pairs = [
        (" ".join(rng.choices(words, k=rng.randint(1, 5))), " ".join(rng.choices(targets, k=rng.randint(1, 5))))
        for _ in range(40)
    ]
    model = fit_ibm_model1(pairs, iterations=4)
    reference = _slow_model1(pairs, iterations=4)
    assert len(reference) == len(model.probability)
    for (e, f), value in reference.items():
        assert model.t(e, f) == pytest.approx(value, rel=1e-9, abs=1e-12)
    # each source word's table is a distribution over target words
    sums = np.bincount(model.links.pair_source, weights=model.probability)
    assert np.allclose(sums, 1.0)


def test_links_are_every_target_position_times_every_source_position_and_null() -> None:
    pairs = [("a b c", "x y"), ("a", "z"), ("b b", "x x x")]
    links = cooccurrence_links(pairs)
    assert len(links.link_pair) == 2 * 4 + 1 * 2 + 3 * 3
    assert links.positions == 6
    without_null = cooccurrence_links(pairs, null=False)
    assert len(without_null.link_pair) == 2 * 3 + 1 * 1 + 3 * 2
    assert NULL_WORD not in without_null.source_words


def test_translation_is_word_by_word_with_unknown_words_copied() -> None:
    pairs = [("das Haus", "the house"), ("das Buch", "the book"), ("ein Buch", "a book"), ("ein Haus", "a house")]
    model = fit_ibm_model1(pairs, iterations=10)
    assert model.translate("das Haus") == "the house"
    assert model.translate("ein Buch Fenster") == "a book Fenster"
    assert model.translate("") == ""
    assert NULL_WORD not in model.best


def test_bad_input_is_refused() -> None:
    with pytest.raises(ConfigError, match="iterations=0"):
        fit_ibm_model1(HOUSE_BOOK, iterations=0)
    with pytest.raises(DataError, match="no pair"):
        fit_ibm_model1([("", "x"), ("a", " ")])

"""IBM Model 1 word lexicon (Brown et al. 1993), learnt by EM with vectorised sparse counts; word-by-word translation.

Model 1 explains a target sentence ``e_1..e_m`` given a source sentence ``f_0..f_l`` (``f_0`` the NULL word) by
uniform alignments: ``P(e | f) = eps / (l + 1)^m * prod_j sum_i t(e_j | f_i)``. EM (Brown et al. 1993, eq. 17 and
the ``c(e | f; e, f)`` counts of their Sec. 4) starts from uniform ``t`` and repeats

* E-step: for every target position ``j`` and source position ``i`` of a pair, the posterior of the link
  ``a_j = i`` is ``t(e_j | f_i) / sum_i' t(e_j | f_i')``;
* M-step: ``t(e | f) = c(e, f) / sum_e' c(e', f)``, ``c(e, f)`` the sum of those posteriors over every link of
  ``f`` to ``e`` in the corpus.

Every (target position, source position) link of the corpus is one entry of flat arrays, and the (source word,
target word) pairs that ever co-occur index the table ``t``; one EM iteration is a handful of ``numpy.bincount``
calls over the links, so tens of thousands of pairs take seconds.

Translation (:meth:`IBMModel1.translate`): each source word becomes its most probable target word
``argmax_e t(e | f)`` (the NULL word is never a source word of a test sentence); a word unseen in training is
copied. Words are white-space tokens as they are in the text (case and punctuation kept).

Example:
    >>> pairs = [("das Haus", "the house"), ("das Buch", "the book"), ("ein Buch", "a book")]
    >>> model = fit_ibm_model1(pairs, iterations=10)
    >>> model.translate("das Buch"), model.translate("ein Haus Fenster")
    ('the book', 'a house Fenster')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from embreg.errors import ConfigError, DataError

__all__ = ["NULL_WORD", "IBMModel1", "fit_ibm_model1", "cooccurrence_links"]

NULL_WORD = "<null>"
"""The source vocabulary's entry 0 when the model has a NULL word (it is never a word of a real sentence: the
vocabulary is built from white-space tokens, and this name is taken before any of them)."""


@dataclass
class CooccurrenceLinks:
    """Every (target position, source position) link of a corpus, as flat arrays.

    Attributes:
        source_words, target_words: the vocabularies (index -> word); with a NULL word it is ``source_words[0]``.
        pair_source, pair_target: ``(K,)`` source / target word index of each co-occurring word pair (the cells of
            the table ``t``).
        link_pair: ``(L,)`` the word pair of each link.
        link_position: ``(L,)`` the target position (over the whole corpus, ``0..M-1``) each link explains.
        positions: ``M``, the target tokens of the corpus.
    """

    source_words: list[str]
    target_words: list[str]
    pair_source: np.ndarray
    pair_target: np.ndarray
    link_pair: np.ndarray
    link_position: np.ndarray
    positions: int


def _index(sentences: Sequence[list[str]], first: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The vocabulary (``first`` words, then every word in order of appearance), every token's word id flat, and
    each sentence's length."""
    words = {w: i for i, w in enumerate(first)}
    flat = [words.setdefault(w, len(words)) for s in sentences for w in s]
    return list(words), np.asarray(flat, dtype=np.int64), np.asarray([len(s) for s in sentences], dtype=np.int64)


def _ranges(lengths: np.ndarray) -> np.ndarray:
    """``[0..lengths[0]), [0..lengths[1]), ...`` concatenated."""
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(int(lengths.sum()), dtype=np.int64) - starts


def cooccurrence_links(pairs: Sequence[tuple[str, str]], null: bool = True) -> CooccurrenceLinks:
    """The links of white-space-tokenised ``(source, target)`` pairs (the NULL word first on the source side).

    Example:
        >>> links = cooccurrence_links([("a b", "x"), ("a", "x y")])
        >>> links.source_words, links.target_words, links.positions, len(links.link_pair)
        (['<null>', 'a', 'b'], ['x', 'y'], 3, 7)
    """
    prefix = [NULL_WORD] if null else []
    source_words, source_ids, source_lengths = _index([prefix + s.split() for s, _ in pairs], prefix)
    target_words, target_ids, target_lengths = _index([t.split() for _, t in pairs], [])
    # every target position j of a pair links to every source position i of it: the m * (l + 1) links of Model 1
    pair_of_position = np.repeat(np.arange(len(pairs)), target_lengths)
    fan_out = source_lengths[pair_of_position]
    link_position = np.repeat(np.arange(len(target_ids), dtype=np.int64), fan_out)
    source_start = np.cumsum(source_lengths) - source_lengths
    link_source = source_ids[np.repeat(source_start[pair_of_position], fan_out) + _ranges(fan_out)]
    link_target = target_ids[link_position]
    width = max(len(target_words), 1)
    cells, link_pair = np.unique(link_source * width + link_target, return_inverse=True)
    return CooccurrenceLinks(
        source_words, target_words, cells // width, cells % width, link_pair.reshape(-1), link_position, len(target_ids)
    )


@dataclass
class IBMModel1:
    """A learnt Model 1 table ``t(e | f)`` over the co-occurring word pairs, and its best translation per word.

    Attributes:
        links: the corpus's links (vocabularies and the table's cells).
        probability: ``(K,)`` ``t(e | f)`` of each cell ``(links.pair_source[k], links.pair_target[k])``.
        best: source word -> its most probable target word (ties: the target word seen first in the corpus).
    """

    links: CooccurrenceLinks
    probability: np.ndarray
    best: dict[str, str]

    def t(self, target: str, source: str) -> float:
        """``t(target | source)`` (0 for a pair that never co-occurs or a word outside the vocabularies)."""
        links = self.links
        try:
            f, e = links.source_words.index(source), links.target_words.index(target)
        except ValueError:
            return 0.0
        hit = np.flatnonzero((links.pair_source == f) & (links.pair_target == e))
        return float(self.probability[hit[0]]) if len(hit) else 0.0

    def translate(self, sentence: str) -> str:
        """Word-by-word translation: each white-space token becomes its best target word, unknown ones are copied."""
        return " ".join(self.best.get(word, word) for word in sentence.split())


def em_iteration(links: CooccurrenceLinks, probability: np.ndarray) -> np.ndarray:
    """One EM iteration of Model 1: the table ``t`` after the E-step's link posteriors under ``probability``.

    Args:
        links: the corpus's links.
        probability: ``(K,)`` the current ``t(e | f)`` of each cell.

    Returns:
        ``(K,)`` the re-estimated ``t(e | f)``: expected counts normalised over the target words of each source word.
    """
    on_link = probability[links.link_pair]
    per_position = np.bincount(links.link_position, weights=on_link, minlength=links.positions)
    posterior = on_link / per_position[links.link_position]
    counts = np.bincount(links.link_pair, weights=posterior, minlength=len(probability))
    per_source = np.bincount(links.pair_source, weights=counts, minlength=len(links.source_words))
    return counts / per_source[links.pair_source]


def fit_ibm_model1(pairs: Sequence[tuple[str, str]], iterations: int = 5, null: bool = True) -> IBMModel1:
    """IBM Model 1 learnt by ``iterations`` EM iterations from uniform ``t(e | f) = 1 / |V_e|``.

    Args:
        pairs: ``(source, target)`` sentences; words are their white-space tokens.
        iterations: EM iterations (Brown et al. 1993 use a few; 5 is common).
        null: give every source sentence the NULL word (position 0), which target words with no source
            counterpart align to.

    Raises:
        ConfigError: ``iterations < 1``.
        DataError: no pair with words on both sides.
    """
    if iterations < 1:
        raise ConfigError(f"iterations={iterations} must be >= 1")
    usable = [(s, t) for s, t in pairs if s.split() and t.split()]
    if not usable:
        raise DataError("no pair has words on both sides: IBM Model 1 has nothing to learn from")
    links = cooccurrence_links(usable, null=null)
    probability = np.full(len(links.pair_source), 1.0 / len(links.target_words))
    for _ in range(iterations):
        probability = em_iteration(links, probability)
    return IBMModel1(links, probability, _best_translations(links, probability, null))


def _best_translations(links: CooccurrenceLinks, probability: np.ndarray, null: bool) -> dict[str, str]:
    # per source word, the cell of the highest t; among equals the lowest target index (seen first)
    order = np.lexsort((links.pair_target, -probability, links.pair_source))
    first = np.ones(len(order), dtype=bool)
    first[1:] = links.pair_source[order][1:] != links.pair_source[order][:-1]
    chosen = order[first]
    best = {
        links.source_words[f]: links.target_words[e]
        for f, e in zip(links.pair_source[chosen].tolist(), links.pair_target[chosen].tolist())
    }
    if null:
        best.pop(NULL_WORD, None)
    return best

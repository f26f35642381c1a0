"""Greedy and beam decoding (embreg.nn.decoding): beam 1 is greedy, a full-width beam finds the exhaustive optimum of
its score, narrower beams never score above it, and the penalties equal GNMT's formulas."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from embreg.models.transformer_nmt import NUM_SPECIAL, TransformerTranslator
from embreg.nn.decoding import beam_search, coverage_penalty, greedy_decode, length_penalty, sequence_score


def _model(vocab: int = 12, seed: int = 0) -> TransformerTranslator:
    torch.manual_seed(seed)
    return TransformerTranslator(
        vocab, vocab, d_model=16, heads=2, encoder_layers=1, decoder_layers=2, feedforward=32, dropout=0.0
    ).eval()


SOURCES = torch.tensor([[5, 6, 7, 8, 2], [9, 4, 2, 0, 0], [10, 11, 5, 2, 0]])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_of_one_is_greedy_decoding(seed: int) -> None:
    model = _model(seed=seed)
    greedy = greedy_decode(model, SOURCES, max_len=6)
    for alpha, beta in [(0.0, 0.0), (0.6, 0.0), (1.0, 0.2)]:
        assert beam_search(model, SOURCES, 6, beam=1, alpha=alpha, beta=beta).tokens == greedy.tokens


def test_length_penalty_is_gnmt_formula() -> None:
    for length, alpha in [(1, 0.6), (7, 0.6), (12, 1.0), (3, 0.0)]:
        assert length_penalty(length, alpha) == pytest.approx((5 + length) ** alpha / 6**alpha, rel=1e-12)


def test_coverage_penalty_is_gnmt_formula_over_real_source_positions() -> None:
    sums = torch.tensor([[0.3, 1.7, 0.9, 0.05], [1.0, 0.2, 0.4, 0.8]], dtype=torch.float64)
    padding = torch.tensor([[False, False, False, True], [False, False, False, False]])
    beta = 0.2
    got = coverage_penalty(sums, padding, beta)
    expected = [
        beta * sum(math.log(min(s, 1.0)) for s in (0.3, 1.7, 0.9)),
        beta * sum(math.log(min(s, 1.0)) for s in (1.0, 0.2, 0.4, 0.8)),
    ]
    assert got.tolist() == pytest.approx(expected, rel=1e-12)
    assert coverage_penalty(sums, padding, 0.0).tolist() == [0.0, 0.0]


def _hypotheses(regular: list[int], eos: int, max_len: int) -> list[tuple[list[int], bool]]:
    """Every hypothesis of the search space: ``n < max_len`` regular tokens then ``</s>``, or ``max_len`` cut off."""
    space = [(list(p), True) for n in range(max_len) for p in itertools.product(regular, repeat=n)]
    return space + [(list(p), False) for p in itertools.product(regular, repeat=max_len)]


@pytest.mark.parametrize(("alpha", "beta"), [(0.0, 0.0), (0.6, 0.3), (1.0, 1.0)])
def test_full_width_beam_finds_the_exhaustive_optimum_and_narrower_beams_never_beat_it(alpha, beta) -> None:
    vocab, max_len = NUM_SPECIAL + 3, 3
    model = _model(vocab=vocab, seed=3)
    regular = list(range(NUM_SPECIAL, vocab))
    space = _hypotheses(regular, model.eos_id, max_len)
    for source in ([[4, 5, 6, 2]], [[6, 2, 0, 0]]):
        src = torch.tensor(source)
        scores = {(tuple(t), ended): sequence_score(model, src, t, alpha, beta, ended=ended) for t, ended in space}
        optimum = max(scores.values())
        wide = beam_search(model, src, max_len, beam=len(space), alpha=alpha, beta=beta)
        assert wide.scores[0] == pytest.approx(optimum, abs=1e-5)
        best = max(scores, key=scores.__getitem__)
        assert tuple(wide.tokens[0]) == best[0]
        for beam in (1, 2, 3, 5):
            narrow = beam_search(model, src, max_len, beam=beam, alpha=alpha, beta=beta)
            tokens = narrow.tokens[0]
            own = scores[(tuple(tokens), len(tokens) < max_len)]
            assert narrow.scores[0] == pytest.approx(own, abs=1e-5)  # the score it reports is its hypothesis's
            assert own <= optimum + 1e-6


def test_beam_search_of_a_batch_equals_each_source_alone() -> None:
    model = _model(seed=4)
    batch = beam_search(model, SOURCES, 6, beam=3, alpha=0.6, beta=0.2)
    for row in range(SOURCES.shape[0]):
        length = int((SOURCES[row] != 0).sum())
        alone = beam_search(model, SOURCES[row : row + 1, :length], 6, beam=3, alpha=0.6, beta=0.2)
        assert alone.tokens[0] == batch.tokens[row]
        assert alone.scores[0] == pytest.approx(batch.scores[row], abs=1e-5)


def test_decoding_refuses_bad_arguments() -> None:
    model = _model()
    with pytest.raises(ValueError, match="beam=0 must be >= 1"):
        beam_search(model, SOURCES, 4, beam=0)
    with pytest.raises(ValueError, match="max_len=0 must be >= 1"):
        greedy_decode(model, SOURCES, 0)
    with pytest.raises(ValueError, match=r"source must be \(B, S\)"):
        greedy_decode(model, SOURCES[0], 4)

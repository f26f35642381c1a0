"""Decoding from the model's cache (embreg.nn.decoding with embreg.nn.decoding_steps): greedy and beam outputs are
the same with and without the cache, models without the incremental extension (or in training mode) are decoded
through ``decode_step``, beam search runs one row per source at the first step and only live rows after, and the
early stop returns what the search without it returns."""

from __future__ import annotations

import math
from functools import lru_cache

import pytest
import torch

from embreg.models.transformer_nmt import TransformerTranslator
from embreg.nn import decoding
from embreg.nn.decoding import beam_search, greedy_decode
from tests.helpers.tiny_translator import SOURCES, PlainProtocol, tiny_translator, trained_translator

SETTINGS = [(1, 0.0, 0.0), (2, 0.6, 0.0), (3, 0.6, 0.2), (5, 1.0, 0.2), (12, 0.6, 0.0)]  # (beam, alpha, beta)


@lru_cache(maxsize=1)
def _trained() -> TransformerTranslator:
    return trained_translator()


def _models() -> list[TransformerTranslator]:
    return [tiny_translator(seed=0), tiny_translator(seed=5, layers=3), _trained()]


def _forbid_decode_step(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("decode_step was called: the cached path was not taken")

    monkeypatch.setattr(TransformerTranslator, "decode_step", refuse)


@pytest.mark.parametrize("index", [0, 1, 2], ids=["random", "random-3-layers", "trained"])
def test_greedy_and_beam_outputs_are_the_same_with_and_without_the_cache(index: int, monkeypatch) -> None:
    model = _models()[index]
    plain = PlainProtocol(model)
    uncached = [greedy_decode(plain, SOURCES, 7)]
    uncached += [beam_search(plain, SOURCES, 7, beam, alpha, beta) for beam, alpha, beta in SETTINGS]
    assert plain.calls > 0
    _forbid_decode_step(monkeypatch)  # the translator is now decoded from its cache only
    cached = [greedy_decode(model, SOURCES, 7)]
    cached += [beam_search(model, SOURCES, 7, beam, alpha, beta) for beam, alpha, beta in SETTINGS]
    for got, expected in zip(cached, uncached):
        assert got.tokens == expected.tokens
        assert got.scores == pytest.approx(expected.scores, abs=1e-5)
        assert got.log_probs == pytest.approx(expected.log_probs, abs=1e-5)


def test_a_model_in_training_mode_is_decoded_through_decode_step() -> None:
    model = tiny_translator(seed=0)
    calls = []
    original = TransformerTranslator.decode_step

    def counting(self, *args):
        calls.append(1)
        return original(self, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TransformerTranslator, "decode_step", counting)
        model.train()
        greedy_decode(model, SOURCES, 4)
        beam_search(model, SOURCES, 4, beam=2)
    assert len(calls) > 0


class _RowCounter:
    """The translator with its incremental extension, recording the rows of every ``decode_next`` call."""

    def __init__(self, model: TransformerTranslator) -> None:
        self.model, self.rows = model, []
        self.bos_id, self.eos_id, self.pad_id, self.training = model.bos_id, model.eos_id, model.pad_id, False

    def encode(self, source):
        return self.model.encode(source)

    def decode_step(self, *args):
        raise AssertionError("decode_step was called")

    def start_decoding(self, memory, padding):
        return self.model.start_decoding(memory, padding)

    def decode_next(self, tokens, state):
        self.rows.append(int(tokens.shape[0]))
        return self.model.decode_next(tokens, state)

    def reorder(self, state, rows):
        return self.model.reorder(state, rows)


def test_beam_search_runs_one_row_per_source_first_and_only_live_rows_after() -> None:
    counter = _RowCounter(_trained())
    beam_search(counter, SOURCES, 7, beam=4, alpha=0.6)
    batch = SOURCES.shape[0]
    assert counter.rows[0] == batch  # every beam is <s> at the first step
    assert all(rows <= 4 * batch for rows in counter.rows)
    assert counter.rows[-1] < 4 * batch  # finished sources and dead beams leave the model calls
    counter.rows.clear()
    greedy_decode(counter, SOURCES, 7)
    assert counter.rows[0] == batch and counter.rows == sorted(counter.rows, reverse=True)


@pytest.mark.parametrize(("alpha", "beta"), [(0.0, 0.0), (0.6, 0.0), (1.0, 0.2)])
def test_the_early_stop_returns_what_the_search_without_it_returns(alpha, beta, monkeypatch) -> None:
    model = _trained()
    stopped = [_RowCounter(model) for _ in range(2)]
    sources = torch.cat([SOURCES, SOURCES.flip(0)])
    early = beam_search(stopped[0], sources, 8, beam=4, alpha=alpha, beta=beta)
    monkeypatch.setattr(decoding, "_bound_length_penalty", lambda *args: math.inf)  # no bound: the rule never fires
    full = beam_search(stopped[1], sources, 8, beam=4, alpha=alpha, beta=beta)
    assert early.tokens == full.tokens
    assert early.scores == full.scores and early.log_probs == full.log_probs
    assert sum(stopped[0].rows) < sum(stopped[1].rows)  # the rule saved model rows

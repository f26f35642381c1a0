"""Incremental decoding of the translator (embreg.models.nmt_incremental): the cached steps compute what the
uncached ``decode_step`` computes on the whole prefix, at every step, through reorders, on random and trained
models; eval mode only; positions beyond the table are refused."""

from __future__ import annotations

import pytest
import torch

from embreg.errors import DataError
from embreg.models.transformer_nmt import TransformerTranslator
from tests.helpers.tiny_translator import SOURCES, tiny_translator, trained_translator


@pytest.mark.parametrize("kind", ["random", "random-3-layers", "trained"])
def test_cached_steps_equal_the_uncached_decode_step_at_every_step(kind: str) -> None:
    model = {
        "random": lambda: tiny_translator(seed=1),
        "random-3-layers": lambda: tiny_translator(seed=2, layers=3),
        "trained": lambda: trained_translator(),
    }[kind]()
    with torch.no_grad():
        _check_every_step(model)


def _check_every_step(model: TransformerTranslator) -> None:
    memory, padding = model.encode(SOURCES)
    state = model.start_decoding(memory, padding)
    prefix = torch.full((SOURCES.shape[0], 1), model.bos_id)
    generator = torch.Generator().manual_seed(0)
    for step in range(9):
        log_probs, attention, state = model.decode_next(prefix[:, -1], state)
        expected_log_probs, expected_attention = model.decode_step(prefix, memory, padding)
        assert state.step == step + 1
        torch.testing.assert_close(log_probs, expected_log_probs, rtol=0, atol=1e-5)
        torch.testing.assert_close(attention, expected_attention, rtol=0, atol=1e-6)
        assert bool((attention[padding] == 0).all())  # padding gets no attention
        if step in (2, 5):  # beam search's reorders: rows repeated, dropped and permuted
            rows = torch.randint(0, prefix.shape[0], (prefix.shape[0] + 1,), generator=generator)
            state = model.reorder(state, rows)
            prefix, memory, padding = prefix[rows], memory[rows], padding[rows]
        prefix = torch.cat([prefix, torch.randint(4, 12, (prefix.shape[0], 1), generator=generator)], dim=1)


def test_incremental_decoding_refuses_a_model_in_training_mode() -> None:
    model = tiny_translator().train()
    memory, padding = model.encode(SOURCES)
    with pytest.raises(ValueError, match=r"eval-mode decoder \(dropout off\): call model.eval\(\)"):
        model.start_decoding(memory, padding)


@torch.no_grad()
def test_a_position_beyond_the_positional_table_is_a_data_error() -> None:
    model = TransformerTranslator(
        12, 12, d_model=8, heads=2, encoder_layers=1, decoder_layers=1, feedforward=16, max_positions=5
    ).eval()
    memory, padding = model.encode(SOURCES)
    state = model.start_decoding(memory, padding)
    tokens = torch.full((SOURCES.shape[0],), model.bos_id)
    for _ in range(5):
        _, _, state = model.decode_next(tokens, state)
    with pytest.raises(DataError, match="a sequence of 6 tokens is longer than the model's 5"):
        model.decode_next(tokens, state)

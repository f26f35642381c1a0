"""The translation evaluation's decoding (embreg.tasks.translation.evaluation.translate_ids, which ``embreg translate``
and the task's test metrics call) takes the cached path, and gives what the uncached path gives."""

from __future__ import annotations

import pytest
import torch

from embreg.models.transformer_nmt import TransformerTranslator
from embreg.nn.decoding import beam_search
from embreg.tasks.translation.evaluation import DecodeSettings, translate_ids
from tests.helpers.tiny_translator import PlainProtocol, trained_translator

SOURCES = [[5, 6, 7, 2], [9, 2], [10, 11, 5, 4, 8, 2], [7, 2]]


@pytest.mark.parametrize("settings", [DecodeSettings(1, max_len=7), DecodeSettings(4, 0.6, 0.2, max_len=7)])
def test_translate_ids_decodes_from_the_cache_in_eval_mode(settings: DecodeSettings, monkeypatch) -> None:
    model = trained_translator()
    plain = PlainProtocol(model)
    expected = [
        beam_search(plain, torch.tensor([source]), 7, settings.beam, settings.alpha, settings.beta).tokens[0]
        for source in SOURCES
    ]
    assert plain.calls > 0

    def refuse(*args, **kwargs):
        raise AssertionError("decode_step was called: the cached path was not taken")

    monkeypatch.setattr(TransformerTranslator, "decode_step", refuse)
    model.train()  # translate_ids switches to eval mode, and back
    assert translate_ids(model, SOURCES, settings, batch_size=3) == expected
    assert model.training

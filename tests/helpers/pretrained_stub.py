"""``load_pretrained`` answered with a tiny random BERT, for tests that build the encoder classifier from a recipe."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from torch import nn

__all__ = ["tiny_pretrained"]


def tiny_pretrained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Patches :func:`embreg.models.pretrained.load_pretrained` (and ``load_tokenizer``, its tokenizer) while the
    generator is open (use it in a fixture: ``yield from tiny_pretrained(tmp_path_factory)``); yields the patched
    loader.

    The encoder is a tiny random BERT (2 layers, width 16) with a working fast tokenizer: the named checkpoint's own
    when it is cached (read offline in about a second), else the word-level one of
    :func:`tests.helpers.finetune_tiny.tiny_checkpoint`. The cached MiniLM takes ~0.9 s a step on one thread, which
    would make the encoder rows most of a registry-wide test's time, and those tests check the wiring, not the
    pretrained weights (tests/models/test_encoder_pretrained.py does).
    """
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer, BertConfig, BertModel

    from embreg.models import pretrained

    real = pretrained.load_pretrained
    tokenizers: dict[str, Any] = {}

    def load_tokenizer(name_or_path: Any, *, progress: bool = True) -> Any:
        key = str(name_or_path)
        if key not in tokenizers:
            cached = {info.name: info.cached for info in pretrained.list_pretrained()}
            if cached.get(key):
                tokenizers[key] = AutoTokenizer.from_pretrained(
                    str(pretrained.pretrained_dir(key)), local_files_only=True
                )
            elif key not in cached:  # a local checkpoint directory
                tokenizers[key] = real(name_or_path, progress=False)[1]
            else:
                from tests.helpers.finetune_tiny import tiny_checkpoint

                tiny = tiny_checkpoint(tmp_path_factory.mktemp("tiny-bert"), mask=True)  # [MASK]: the mlm family
                tokenizers[key] = real(tiny, progress=False)[1]
        return tokenizers[key]

    def load(name_or_path: Any, *, progress: bool = True) -> tuple[nn.Module, Any]:
        tokenizer = load_tokenizer(name_or_path)
        config = BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=128,
        )
        return BertModel(config).eval(), tokenizer

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pretrained, "load_pretrained", load)
        mp.setattr(pretrained, "load_tokenizer", load_tokenizer)
        yield load

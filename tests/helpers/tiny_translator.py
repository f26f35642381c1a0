"""Tiny :class:`TransformerTranslator` models for decoding tests: randomly initialised, or briefly trained on a
reversal task, and a wrapper that hides the incremental extension (the plain ``EncoderDecoder`` protocol)."""

from __future__ import annotations

import torch

from embreg.models.transformer_nmt import NUM_SPECIAL, TransformerTranslator

__all__ = ["tiny_translator", "trained_translator", "PlainProtocol", "SOURCES"]

SOURCES = torch.tensor([[5, 6, 7, 8, 2], [9, 4, 2, 0, 0], [10, 11, 5, 2, 0], [7, 7, 2, 0, 0]])
"""Right-padded source ids (``</s>`` = 2, ``<pad>`` = 0) over a vocabulary of 12."""


def tiny_translator(vocab: int = 12, seed: int = 0, layers: int = 2) -> TransformerTranslator:
    """A randomly initialised translator in eval mode (dropout 0.1, off in eval)."""
    torch.manual_seed(seed)
    return TransformerTranslator(
        vocab, vocab, d_model=16, heads=2, encoder_layers=1, decoder_layers=layers, feedforward=32, dropout=0.1
    ).eval()


def trained_translator(vocab: int = 12, steps: int = 60, seed: int = 0) -> TransformerTranslator:
    """A translator trained ``steps`` Adam steps to reverse 1-4 regular tokens (so it ends sentences), in eval
    mode."""
    model = tiny_translator(vocab, seed).train()
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(steps):
        source = torch.zeros(16, 6, dtype=torch.long)
        target = torch.zeros(16, 7, dtype=torch.long)
        for row in range(16):
            length = int(torch.randint(1, 5, (1,), generator=generator))
            words = torch.randint(NUM_SPECIAL, vocab, (length,), generator=generator)
            source[row, : length + 1] = torch.cat([words, torch.tensor([model.eos_id])])
            target[row, : length + 2] = torch.cat([torch.tensor([model.bos_id]), words.flip(0), torch.tensor([2])])
        batch = {"source": source, "target": target}
        loss = model.loss(batch, model(batch))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return model.eval()


class PlainProtocol:
    """``model`` seen through the plain ``EncoderDecoder`` protocol only (no incremental extension); counts the
    ``decode_step`` calls."""

    def __init__(self, model: TransformerTranslator) -> None:
        self.model = model
        self.bos_id, self.eos_id, self.pad_id = model.bos_id, model.eos_id, model.pad_id
        self.calls = 0

    def encode(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.encode(source)

    def decode_step(
        self, prefix: torch.Tensor, memory: torch.Tensor, source_padding: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls += 1
        return self.model.decode_step(prefix, memory, source_padding)

"""The rows a search decodes, one step at a time: from a model's cached state, or by re-running its prefix.

:func:`embreg.nn.decoding.greedy_decode` and :func:`~embreg.nn.decoding.beam_search` drive a :class:`Stepper`:
``next(tokens)`` appends one token per row and gives the next-token log-probabilities and cross-attention,
``keep(rows)`` keeps (and repeats) rows, e.g. beam search's origin beams or the rows still decoding. A model with
the incremental extension of the protocol (``start_decoding``, ``decode_next``, ``reorder``:
:class:`embreg.nn.decoding.IncrementalDecoder`) in eval mode is stepped from its cache (:class:`CachedStepper`);
any other :class:`~embreg.nn.decoding.EncoderDecoder`, or one in training mode, by calling ``decode_step`` on the
whole prefix every step (:class:`PrefixStepper`). Both give ``<pad>`` and ``<s>`` a log-probability of ``-inf``
(never generated).

Example:
    >>> from embreg.models.transformer_nmt import TransformerTranslator
    >>> model = TransformerTranslator(12, 12, d_model=16, heads=2, encoder_layers=1, decoder_layers=1,
    ...                               feedforward=32, dropout=0.0).eval()
    >>> memory, padding = model.encode(torch.tensor([[5, 6, 2]]))
    >>> stepper = make_stepper(model, memory, padding)
    >>> log_probs, attention = stepper.next(torch.tensor([model.bos_id]))
    >>> type(stepper).__name__, log_probs.shape, bool(log_probs[0, model.pad_id] == -math.inf)
    ('CachedStepper', torch.Size([1, 12]), True)
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import torch

__all__ = ["Stepper", "CachedStepper", "PrefixStepper", "make_stepper", "is_incremental"]

_INCREMENTAL = ("start_decoding", "decode_next", "reorder")


class Stepper(Protocol):
    """``N`` rows being decoded (see the module docstring)."""

    def next(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``tokens (N,)`` -> log-probabilities ``(N, V)`` float32 and cross-attention ``(N, S)``."""
        ...

    def keep(self, rows: torch.Tensor) -> None:
        """Keep rows ``rows (N',)`` (indices into the current rows, repeats allowed)."""
        ...


def is_incremental(model: Any) -> bool:
    """True when ``model`` has the incremental extension and is not in training mode (so it is decoded cached).

    Example:
        >>> is_incremental(object())
        False
    """
    return all(callable(getattr(model, name, None)) for name in _INCREMENTAL) and not getattr(model, "training", False)


def _never_generated(model: Any, log_probs: torch.Tensor) -> torch.Tensor:
    special = torch.tensor([model.pad_id, model.bos_id], device=log_probs.device)
    return log_probs.index_fill_(1, special, -math.inf)


class CachedStepper:
    """Rows of a model's own incremental state (``decode_next`` on the new tokens only)."""

    def __init__(self, model: Any, memory: torch.Tensor, source_padding: torch.Tensor) -> None:
        self.model = model
        self.state = model.start_decoding(memory, source_padding)

    def next(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_probs, attention, self.state = self.model.decode_next(tokens, self.state)
        return _never_generated(self.model, log_probs.float()), attention.float()

    def keep(self, rows: torch.Tensor) -> None:
        self.state = self.model.reorder(self.state, rows)


class PrefixStepper:
    """Rows re-run through ``decode_step`` on their whole prefix every step (models without a cache)."""

    def __init__(self, model: Any, memory: torch.Tensor, source_padding: torch.Tensor) -> None:
        self.model, self.memory, self.padding = model, memory, source_padding
        self.prefix = torch.empty(memory.shape[0], 0, dtype=torch.long, device=memory.device)

    def next(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.prefix = torch.cat([self.prefix, tokens.unsqueeze(1)], dim=1)
        log_probs, attention = self.model.decode_step(self.prefix, self.memory, self.padding)
        return _never_generated(self.model, log_probs.float().clone()), attention.float()

    def keep(self, rows: torch.Tensor) -> None:
        self.prefix, self.memory, self.padding = self.prefix[rows], self.memory[rows], self.padding[rows]


def make_stepper(model: Any, memory: torch.Tensor, source_padding: torch.Tensor) -> Stepper:
    """A :class:`CachedStepper` when :func:`is_incremental` holds, else a :class:`PrefixStepper`; one row per
    source of ``memory (B, S, ...)``."""
    if is_incremental(model):
        return CachedStepper(model, memory, source_padding)
    return PrefixStepper(model, memory, source_padding)

"""Evaluating a translator: loss on teacher-forced batches, and sacreBLEU BLEU and chrF of decoded sentences.

BLEU and chrF are sacreBLEU's corpus-level scores on detokenised text (the BPE pieces decoded back to words), with
its default settings (13a tokenisation for BLEU; chrF with character 6-grams, beta 2). Decoding is
:func:`embreg.nn.decoding.greedy_decode` or :func:`~embreg.nn.decoding.beam_search` with GNMT's penalties.

:class:`TranslationEvaluator` follows the trainer's protocol ``evaluator(model, split) -> {metric: value}``: ``loss``
(the model's label-smoothed loss, mean over the split's batches), ``bleu`` and ``chrf``. The validation split is
decoded greedily on its first ``valid_sentences`` sources, the test split with the configured beam search.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from embreg.nn.decoding import Decoded, beam_search, greedy_decode
from embreg.train.device import model_device, move_batch

__all__ = ["DecodeSettings", "corpus_scores", "translate_ids", "TranslationEvaluator"]


@dataclass(frozen=True)
class DecodeSettings:
    """``beam`` (1: greedy), GNMT's ``alpha`` (length) and ``beta`` (coverage), and ``max_len`` tokens."""

    beam: int = 1
    alpha: float = 0.0
    beta: float = 0.0
    max_len: int = 64


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """sacreBLEU's corpus BLEU and chrF of ``hypotheses`` against one reference each.

    Example:
        >>> round(corpus_scores(["the cat sat on the mat"], ["the cat sat on the mat"])["bleu"], 6)
        100.0
    """
    import sacrebleu

    refs = [list(references)]
    return {
        "bleu": float(sacrebleu.corpus_bleu(list(hypotheses), refs).score),
        "chrf": float(sacrebleu.corpus_chrf(list(hypotheses), refs).score),
    }


@torch.no_grad()
def translate_ids(
    model: Any, sources: Sequence[Sequence[int]], settings: DecodeSettings, batch_size: int
) -> list[list[int]]:
    """Decoded target ids of every source id list (``</s>`` at the end of each), in order, in eval mode."""
    was_training = model.training
    model.eval()
    device = model_device(model)
    out: list[list[int]] = []
    try:
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        decoded: dict[int, list[int]] = {}
        for start in range(0, len(order), batch_size):
            index = order[start : start + batch_size]
            width = max(len(sources[i]) for i in index)
            source = torch.full((len(index), width), model.pad_id, dtype=torch.long)
            for row, i in enumerate(index):
                source[row, : len(sources[i])] = torch.as_tensor(sources[i])
            source = source.to(device)
            if settings.beam == 1:
                result: Decoded = greedy_decode(model, source, settings.max_len)
            else:
                result = beam_search(model, source, settings.max_len, settings.beam, settings.alpha, settings.beta)
            decoded.update(zip(index, result.tokens))
        out = [decoded[i] for i in range(len(sources))]
    finally:
        model.train(was_training)
    return out


class TranslationEvaluator:
    """Loss, BLEU and chrF of a translator on the valid and test splits.

    Args:
        tensors: ``{split: {"source": (N, S), "target": (N, T + 1)}}`` padded ids (the loss batches).
        sources: ``{split: [source id lists]}`` (with ``</s>``) of the sentences to decode.
        references: ``{split: [reference texts]}``, aligned with ``sources``.
        detokenize: target ids -> text.
        settings: ``{split: DecodeSettings}``.
        batch_size: examples per forward pass.
    """

    def __init__(
        self,
        tensors: dict[str, dict[str, torch.Tensor]],
        sources: dict[str, list[list[int]]],
        references: dict[str, list[str]],
        detokenize: Any,
        settings: dict[str, DecodeSettings],
        batch_size: int = 64,
    ) -> None:
        self.tensors, self.sources, self.references = tensors, sources, references
        self.detokenize, self.settings, self.batch_size = detokenize, settings, batch_size
        self.seconds: dict[str, float] = {}

    @torch.no_grad()
    def loss(self, model: nn.Module, split: str) -> float:
        """Mean of the model's loss over the split's batches, in eval mode."""
        was_training = model.training
        model.eval()
        device = model_device(model)
        data = self.tensors[split]
        total, count = 0.0, 0
        try:
            for start in range(0, data["source"].shape[0], self.batch_size):
                batch = move_batch({k: v[start : start + self.batch_size] for k, v in data.items()}, device)
                total += float(model.loss(batch, model(batch))) * batch["source"].shape[0]  # type: ignore[operator]
                count += batch["source"].shape[0]
        finally:
            model.train(was_training)
        return total / count

    def decode(self, model: nn.Module, split: str, settings: DecodeSettings | None = None) -> dict[str, float]:
        """BLEU and chrF of the split's sources decoded with ``settings`` (default: the split's), and the seconds."""
        settings = settings or self.settings[split]
        began = time.perf_counter()
        ids = translate_ids(model, self.sources[split], settings, self.batch_size)
        seconds = time.perf_counter() - began
        scores = corpus_scores([self.detokenize(t) for t in ids], self.references[split])
        return {**scores, "decode_seconds": seconds}

    def __call__(self, model: nn.Module, split: str) -> dict[str, float]:
        decoded = self.decode(model, split)
        return {"loss": self.loss(model, split), "bleu": decoded["bleu"], "chrf": decoded["chrf"]}

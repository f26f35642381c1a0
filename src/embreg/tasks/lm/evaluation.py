"""Perplexity of a language model on named token streams, carrying the state across windows."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from embreg.tasks.lm.batches import batchify
from embreg.train.device import model_device

if TYPE_CHECKING:
    from embreg.models.protocols import SequenceModel


def perplexity(model: nn.Module, ids: np.ndarray | torch.Tensor, *, batch_size: int = 10, bptt: int = 70) -> dict:
    """Mean cross-entropy (nats per token) and perplexity ``exp(loss)`` of ``model`` on a token stream.

    The stream is cut into ``batch_size`` streams and read in windows of ``bptt``; the state is carried from window
    to window. Runs in eval mode (no dropout) without gradients. The model needs
    ``forward_sequence(tokens, state) -> (ModelOutput, state)`` (e.g. :class:`embreg.models.LSTMLanguageModel`).

    Returns:
        ``{"loss": mean cross-entropy, "ppl": perplexity, "tokens": predicted tokens}``.

    Example:
        >>> from embreg.models import LSTMLanguageModel
        >>> lm = LSTMLanguageModel.build(vocab_size=30, emb_dim=8, hidden_dim=8, layers=1)
        >>> m = perplexity(lm, np.random.default_rng(0).integers(0, 30, 500), batch_size=2, bptt=20)
        >>> 20 < m["ppl"] < 40  # an untrained model is close to uniform over 30 words
        True
    """
    data = batchify(ids, batch_size).to(model_device(model))
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    state = None
    with torch.no_grad():
        for start in range(0, data.shape[1] - 1, bptt):
            length = min(bptt, data.shape[1] - 1 - start)
            tokens = data[:, start : start + length]
            target = data[:, start + 1 : start + 1 + length]
            output, state = cast("SequenceModel", model).forward_sequence(tokens, state)
            logits = output.predictions
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="sum").item()
            count += target.numel()
    model.train(was_training)
    loss = total / max(count, 1)
    return {"loss": loss, "ppl": math.exp(min(loss, 700.0)), "tokens": float(count)}


class PerplexityEvaluator:
    """``evaluator(model, split) -> {"loss", "ppl"}`` over named token streams, for :class:`embreg.train.Trainer`.

    Args:
        splits: ``{split name: 1-D token ids}``.
        batch_size, bptt: see :func:`perplexity` (AWD-LSTM evaluates with batch size 10).

    Example:
        >>> ev = PerplexityEvaluator({"valid": np.arange(100) % 7})
        >>> ev.split_names
        ['valid']
    """

    def __init__(
        self, splits: Mapping[str, np.ndarray | torch.Tensor], *, batch_size: int = 10, bptt: int = 70
    ) -> None:
        self.splits = splits
        self.batch_size = batch_size
        self.bptt = bptt

    @property
    def split_names(self) -> list[str]:
        return list(self.splits)

    def __call__(self, model: nn.Module, split: str) -> dict[str, float]:
        if split not in self.splits:
            raise KeyError(f"unknown split {split!r}; this evaluator has {self.split_names}")
        m = perplexity(model, self.splits[split], batch_size=self.batch_size, bptt=self.bptt)
        return {"loss": m["loss"], "ppl": m["ppl"]}

"""``score`` for language models (see :meth:`~embreg.serving.trained_run.TrainedRun.score`): per-line and total perplexity.

Each line is tokenised as the training corpus was (:func:`embreg.data.text_corpus.tokenize_line`), closed by
``<eos>``, and encoded with the run's vocabulary (words outside it become ``<unk>``, counted per line). The model
reads ``<eos>`` first, as a new sentence starts after one in the training stream, and predicts every token of the
line and its closing ``<eos>``; the line's loss is the mean cross-entropy in nats per token, its perplexity
``exp(loss)``, and the total is the token-weighted mean over all lines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F

from embreg.data.text_corpus import tokenize_line
from embreg.data.text_vocab import EOS
from embreg.serving.served_run import ServedRun

__all__ = ["score"]


@torch.no_grad()
def score(run: ServedRun, texts: Sequence[str]) -> pd.DataFrame:
    vocab = run.prepared.vocab
    model: Any = run.model
    eos = vocab.index[EOS]
    rows = []
    total_loss, total_tokens, total_unknown = 0.0, 0, 0
    for number, line in enumerate(texts, start=1):
        tokens = tokenize_line(line)
        if not tokens:
            continue
        ids = torch.from_numpy(vocab.encode([*tokens, EOS]))
        unknown = int((ids == 0).sum())
        stream = torch.cat([torch.tensor([eos]), ids]).to(run.device)
        output, _ = model.forward_sequence(stream[:-1].unsqueeze(0), None)
        logits = output.predictions.reshape(-1, output.predictions.shape[-1]).float()
        loss = F.cross_entropy(logits, stream[1:], reduction="sum").item()
        rows.append(
            {
                "line": str(number),
                "tokens": len(ids),
                "unknown": unknown,
                "loss": loss / len(ids),
                "perplexity": math.exp(min(loss / len(ids), 700.0)),
            }
        )
        total_loss, total_tokens, total_unknown = total_loss + loss, total_tokens + len(ids), total_unknown + unknown
    mean = total_loss / max(total_tokens, 1)
    rows.append(
        {
            "line": "total",
            "tokens": total_tokens,
            "unknown": total_unknown,
            "loss": mean,
            "perplexity": math.exp(min(mean, 700.0)),
        }
    )
    return pd.DataFrame(rows)

"""A BiLSTM with a structured self-attentive sentence embedding (Lin et al., 2017) on word-piece embeddings.

nlp-best-practices.txt, "Attention" > "Self-attention": the BiLSTM's states ``H`` ``(T, 2u)`` of a text are read
by ``r`` attention hops, ``A = softmax(W_s2 tanh(W_s1 H^T))`` and ``M = A H`` (:mod:`embreg.nn.attention.
self_attentive`); ``M`` flattened goes through a ReLU layer, dropout and the head. The attention matrices are
returned in ``output.hidden["attention"]`` ``(B, r, T)``, so the Frobenius penalty ``||A A^T - I||_F^2``
(regularizer ``attention-penalty``) can be added. The LSTM runs on packed sequences, so the backward direction
starts at each text's last token and padding never enters a state; padding gets no attention weight.

Lin et al. (2017) used u = 300 units per direction, d_a = 350, r = 30 and a 3,000-unit ReLU layer; the defaults
here are smaller (128, 64, 4, 256), sized for short reviews on a CPU.

Example:
    >>> torch.manual_seed(0) is not None
    True
    >>> model = BiLSTMAttention(nn.Embedding(20, 8), num_labels=3, hidden_dim=6, attn_dim=5, hops=2, mlp_dim=7)
    >>> batch = {"input_ids": torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]]),
    ...          "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]), "labels": torch.tensor([1, 0])}
    >>> out = model(batch)
    >>> out.predictions.shape, out.hidden["attention"].shape, out.hidden["attention"][1, :, 3].tolist()
    (torch.Size([2, 3]), torch.Size([2, 2, 4]), [0.0, 0.0])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from embreg.errors import ConfigError
from embreg.models.text_heads import Target, num_task_labels, task_targets
from embreg.models.token_classifier import (
    TokenClassifier,
    TokenModelConfig,
    _positive,
    token_table,
)
from embreg.nn.attention.self_attentive import SelfAttentiveEmbedding
from embreg.registry import register

__all__ = ["BiLSTMAttention", "BiLSTMAttentionConfig", "ATTENTION_KEY"]

ATTENTION_KEY = "attention"
"""Where ``forward`` returns the attention matrices (the key the ``attention-penalty`` regulariser reads)."""


class BiLSTMAttention(TokenClassifier):
    """Embedding -> BiLSTM -> self-attentive embedding ``M`` ``(r, 2u)`` -> flatten -> ReLU layer -> dropout -> head.

    Args:
        embedding: the token table ``(V, E)``.
        num_labels: classes (>= 2), or 1 for regression.
        hidden_dim: LSTM units per direction (``u``).
        layers: stacked BiLSTM layers.
        attn_dim: ``d_a``; hops: ``r``.
        mlp_dim: units of the ReLU layer on the flattened ``M``.
        dropout, token_transform, targets: see :class:`~embreg.models.token_classifier.TokenClassifier`.

    Shapes: ``input_ids`` ``(B, T)`` -> predictions ``(B, C)``; ``hidden["attention"]`` ``(B, r, T')``,
    ``T' <= T`` after padding is trimmed.
    """

    def __init__(
        self,
        embedding: nn.Embedding,
        num_labels: int,
        *,
        hidden_dim: int = 128,
        layers: int = 1,
        attn_dim: int = 64,
        hops: int = 4,
        mlp_dim: int = 256,
        dropout: float = 0.5,
        token_transform: nn.Module | None = None,
        targets: list[Target] | None = None,
    ) -> None:
        for name, value in (("hidden_dim", hidden_dim), ("layers", layers), ("mlp_dim", mlp_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}={value!r} must be an int >= 1")
        super().__init__(
            embedding, mlp_dim, num_labels, dropout=dropout, token_transform=token_transform, targets=targets
        )
        self.lstm = nn.LSTM(embedding.embedding_dim, hidden_dim, layers, batch_first=True, bidirectional=True)
        self.attention = SelfAttentiveEmbedding(2 * hidden_dim, attn_dim, hops)
        self.mlp = nn.Linear(hops * 2 * hidden_dim, mlp_dim)

    def features(self, embedded: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        lengths = mask.long().sum(dim=1).clamp(min=1)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        states, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=embedded.shape[1])
        sentence, weights = self.attention(states, mask)
        return torch.relu(self.mlp(sentence.flatten(1))), {ATTENTION_KEY: weights}


@dataclass
class BiLSTMAttentionConfig(TokenModelConfig):
    """``model: {name: bilstm-attn, ...}`` (see :class:`BiLSTMAttention` and
    :class:`~embreg.models.token_classifier.TokenModelConfig`)."""

    hidden_dim: int = 128
    layers: int = 1
    attn_dim: int = 64
    hops: int = 4
    mlp_dim: int = 256

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("hidden_dim", "layers", "attn_dim", "hops", "mlp_dim"):
            _positive(name, getattr(self, name))


@register(
    "model",
    "bilstm-attn",
    config=BiLSTMAttentionConfig,
    tasks=("classification", "regression"),
    kinds=("token",),
    embeddings=("uniform",),
    provides=("attention_matrix",),
    summary="BiLSTM + structured self-attentive sentence embedding (Lin et al., 2017)",
    reference="nlp-best-practices.txt, Attention > Self-attention (Lin et al., 2017)",
)
def build_bilstm_attention(config: BiLSTMAttentionConfig, context: Any) -> BiLSTMAttention:
    """The BiLSTM with self-attention on the task's word pieces, its table from MiniLM's token embeddings or random."""
    return BiLSTMAttention(
        token_table(config, context, "bilstm-attn"),
        num_task_labels(context),
        hidden_dim=config.hidden_dim,
        layers=config.layers,
        attn_dim=config.attn_dim,
        hops=config.hops,
        mlp_dim=config.mlp_dim,
        dropout=config.dropout,
        token_transform=context.transforms.get("token"),
        targets=task_targets(context),
    )

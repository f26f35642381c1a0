"""BiLSTM-CRF tagger: token embeddings, a bidirectional LSTM, linear emissions and a linear-chain CRF.

Reference: nlp-best-practices.txt, "Sequence labelling" ("CRF output layer": Huang et al. 2015, Lample et al. 2016;
"Constrained decoding"; "Tagging scheme"). The CRF's transitions follow ``tag_scheme``: under ``bio`` or ``iobes``
an invalid start, transition or end scores ``-inf``, so training puts no mass on it and no decode emits it
(:mod:`embreg.nn.crf`). The loss is the negative log-likelihood of the gold tags, averaged over the sentences of
the batch. ``token_transform`` (e.g. SSE-SE, sse-stochastic-shared-embeddings.txt, Sec. 4) swaps token ids in
training; padding keeps its id.

Shapes: ``batch["tokens"]``, ``["tags"]``, ``["mask"]`` ``(B, T)``; predictions (emissions) ``(B, T', K)`` with
``T'`` the batch's longest sentence; :meth:`BiLSTMCRF.decode` ``(B, T')`` tag ids (``-1`` at padding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.models.output import ModelOutput
from embreg.models.transform_sites import is_passed_through, present_transforms
from embreg.nn.crf import CRF
from embreg.registry import register

__all__ = ["BiLSTMCRF", "BiLSTMCRFConfig", "trim_sentences"]


def trim_sentences(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch cut to its longest sentence (``mask`` columns that are padding in every row removed).

    Example:
        >>> b = {"tokens": torch.tensor([[4, 0, 0]]), "mask": torch.tensor([[True, False, False]])}
        >>> trim_sentences(b)["tokens"].tolist()
        [[4]]
    """
    mask = batch["mask"]
    length = max(int(mask.sum(dim=1).max().item()) if mask.numel() else 1, 1)
    if length == mask.shape[1]:
        return batch
    return {k: v[:, :length] if v.dim() == 2 and v.shape[1] == mask.shape[1] else v for k, v in batch.items()}


class BiLSTMCRF(nn.Module):
    """Embeddings -> dropout -> BiLSTM -> dropout -> linear emissions -> CRF (module docstring).

    Args:
        num_tokens: vocabulary size (id 0 is padding).
        tags: the tag names in id order.
        emb_dim, hidden_dim: embedding width and LSTM width per direction.
        layers: stacked BiLSTM layers.
        dropout: dropout on the embeddings and on the LSTM output (and between layers).
        tag_scheme: ``bio``, ``iobes`` or ``none`` (the CRF's constraints).
        token_transform: ids -> ids module applied to the tokens in training (SSE).

    Example:
        >>> model = BiLSTMCRF(10, ["O", "B-X", "I-X"], emb_dim=4, hidden_dim=3, tag_scheme="bio")
        >>> batch = {"tokens": torch.tensor([[2, 3, 0]]), "tags": torch.tensor([[1, 2, 0]]),
        ...          "mask": torch.tensor([[True, True, False]])}
        >>> out = model(batch)
        >>> out.predictions.shape, model.loss(batch, out).dim(), model.decode(batch).shape
        (torch.Size([1, 2, 3]), 0, torch.Size([1, 2]))
    """

    def __init__(
        self,
        num_tokens: int,
        tags: list[str],
        *,
        emb_dim: int = 100,
        hidden_dim: int = 100,
        layers: int = 1,
        dropout: float = 0.5,
        tag_scheme: str = "bio",
        token_transform: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if not 0 <= dropout < 1:
            raise ConfigError(f"dropout={dropout} is outside [0, 1)")
        self.embedding = nn.Embedding(num_tokens, emb_dim, padding_idx=0)
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(
            emb_dim,
            hidden_dim,
            num_layers=layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if layers > 1 else 0.0,
        )
        self.emissions = nn.Linear(2 * hidden_dim, len(tags))
        self.crf = CRF(len(tags), tags=tags, scheme=tag_scheme)
        self.token_transform = token_transform

    def swap_tokens(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``token_transform`` on the tokens in training; padding keeps id 0."""
        if self.token_transform is None or not self.training or is_passed_through(self.token_transform):
            return tokens
        return torch.where(mask, self.token_transform(tokens), tokens)

    def index_transforms(self) -> list[nn.Module]:
        """The token transform, if set (:mod:`embreg.models.transform_sites`)."""
        return present_transforms([self.token_transform])

    def draw_index_transforms(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` (trimmed as :meth:`forward` trims it) with the tokens this training step swaps."""
        drawn = dict(trim_sentences(batch))
        drawn["tokens"] = self.swap_tokens(drawn["tokens"], drawn["mask"])
        return drawn

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        batch = trim_sentences(batch)
        mask = batch["mask"].bool()
        tokens = self.swap_tokens(batch["tokens"], mask)
        embedded = self.dropout(self.embedding(tokens))
        lengths = mask.sum(dim=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        states, _ = self.lstm(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=tokens.shape[1])
        return ModelOutput(self.emissions(self.dropout(states)), {"states": states})

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Negative CRF log-likelihood of the gold tags, mean over the batch's sentences."""
        batch = trim_sentences(batch)
        return -self.crf(output.predictions, batch["tags"], batch["mask"].bool()).mean()

    @torch.no_grad()
    def decode(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Viterbi tag ids ``(B, T')`` (``-1`` at padding), never an invalid sequence of ``tag_scheme``."""
        batch = trim_sentences(batch)
        return self.crf.decode(self.forward(batch).predictions, batch["mask"].bool())


@dataclass
class BiLSTMCRFConfig:
    """The tagger (``model: {name: bilstm-crf, ...}``).

    Attributes:
        emb_dim: token embedding width; hidden_dim: LSTM width per direction; layers: stacked BiLSTM layers.
        dropout: on the embeddings, between layers and on the LSTM output (Lample et al. 2016: 0.5).
        tag_scheme: ``bio`` or ``iobes`` (the CRF bars invalid transitions; the data's tags must be valid ones)
            or ``none`` (a plain CRF; tags need no prefixes, and only token accuracy is reported).
    """

    emb_dim: int = 100
    hidden_dim: int = 100
    layers: int = 1
    dropout: float = 0.5
    tag_scheme: Literal["bio", "iobes", "none"] = "bio"

    def __post_init__(self) -> None:
        for name in ("emb_dim", "hidden_dim", "layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"model.{name}={value!r} must be an int >= 1")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"model.dropout={self.dropout} is outside [0, 1)")
        if self.tag_scheme not in ("bio", "iobes", "none"):
            raise ConfigError(f"model.tag_scheme={self.tag_scheme!r} must be one of bio, iobes, none")


@register(
    "model",
    "bilstm-crf",
    config=BiLSTMCRFConfig,
    tasks=("tagging",),
    kinds=("token",),
    embeddings=("uniform",),
    provides=(),
    summary="BiLSTM-CRF sequence tagger with BIO/IOBES-constrained transitions",
    reference="nlp-best-practices.txt, Sequence labelling (CRF output layer, constrained decoding)",
)
def build_bilstm_crf(config: BiLSTMCRFConfig, context: Any) -> BiLSTMCRF:
    """The tagger over the task's vocabulary and training tag set."""
    corpus = context.prepared.corpus
    return BiLSTMCRF(
        len(corpus.vocab),
        corpus.tags,
        emb_dim=config.emb_dim,
        hidden_dim=config.hidden_dim,
        layers=config.layers,
        dropout=config.dropout,
        tag_scheme=config.tag_scheme,
        token_transform=context.transforms.get("token"),
    )

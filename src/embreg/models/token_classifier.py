"""What the text classifiers trained from word-piece embeddings share (the CNN and the BiLSTM with self-attention).

* :func:`~embreg.models.word_piece_swaps.swap_word_pieces`: an index transform (SSE-SE, ...) on the word pieces
  of a batch, in training only, with ``[CLS]``, ``[SEP]`` and padding kept (as in the encoder classifier).
* :func:`minilm_token_embeddings`: the token-embedding matrix of the packaged MiniLM, to start a table from.
* :class:`TokenClassifier`: embedding table + transform + a network's sentence features + dropout + head(s);
  subclasses implement :meth:`TokenClassifier.features`.

The inputs are the task's tokenised texts (``input_ids``, ``attention_mask``: the MiniLM WordPiece tokenizer the
``classification`` task uses), so every text model reads the same tensors.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from dataclasses import dataclass, fields
from typing import Any, Literal

import torch
from torch import nn

from embreg.errors import ConfigError, DataError
from embreg.models.encoder_classifier import trim_padding
from embreg.models.output import ModelOutput
from embreg.models.pretrained import recorded_checkpoint
from embreg.models.text_heads import MultiTaskHeads, Target, head_loss, linear_head
from embreg.models.transform_sites import present_transforms
from embreg.models.word_piece_swaps import swap_word_pieces

__all__ = [
    "minilm_token_embeddings",
    "TokenClassifier",
    "TokenModelConfig",
    "token_table",
    "HEAD_INIT_STD",
]

HEAD_INIT_STD = 0.02
"""Standard deviation of the heads' initial weights (as the encoder classifier's default)."""


def minilm_token_embeddings(pretrained: str, num_ids: int, *, progress: bool = False) -> torch.Tensor:
    """A copy of the input token-embedding matrix ``(V, D)`` of ``pretrained`` (a registry name such as
    ``all-minilm-l6-v2``, fetched into the cache when missing, or a local checkpoint directory), checked to cover
    the ``num_ids`` ids of the task's tokenizer.

    The matrix is read from the checkpoint's ``model.safetensors`` alone (no encoder is built); a checkpoint
    without that file is loaded with :func:`~embreg.models.pretrained.load_pretrained`.

    Raises:
        ConfigError: the matrix has fewer rows than the tokenizer has ids.
        DataError: the checkpoint cannot be found, or its weights hold no token-embedding matrix.
    """
    from pathlib import Path

    from embreg.models.pretrained import fetch_pretrained, load_pretrained

    path = Path(pretrained).expanduser()
    directory = path if path.is_dir() else fetch_pretrained(pretrained, progress=progress)
    weights = directory / "model.safetensors"
    if weights.is_file():
        from safetensors import safe_open

        with safe_open(str(weights), framework="pt") as file:
            keys = [k for k in file.keys() if k.endswith("embeddings.word_embeddings.weight")]
            if len(keys) != 1:
                raise DataError(
                    f"{weights} holds {len(keys)} token-embedding matrices (*embeddings.word_embeddings.weight)"
                )
            weight = file.get_tensor(keys[0])
    else:
        encoder, _ = load_pretrained(directory, progress=progress)
        weight = encoder.get_input_embeddings().weight.detach().clone()
    if weight.shape[0] < num_ids:
        raise ConfigError(
            f"the token embeddings of {pretrained!r} have {weight.shape[0]} rows, fewer than the {num_ids} ids of "
            "its tokenizer"
        )
    return weight[:num_ids].float().clone()


class TokenClassifier(nn.Module, metaclass=ABCMeta):
    """Embedding -> (index transform on the ids, training only) -> :meth:`features` -> dropout -> head(s).

    Args:
        embedding: the token table ``(V, E)``.
        feature_dim: width of :meth:`features`' output.
        num_labels: classes (>= 2), or 1 for regression; ignored with ``targets``.
        dropout: dropout on the sentence features before the head.
        token_transform: ids -> ids module on the word pieces in training (e.g. ``SSE(V, p)``).
        targets: several targets (:class:`~embreg.models.text_heads.Target`): one head each, the loss their
            weighted sum (multi-task learning).
    """

    def __init__(
        self,
        embedding: nn.Embedding,
        feature_dim: int,
        num_labels: int,
        *,
        dropout: float = 0.5,
        token_transform: nn.Module | None = None,
        targets: list[Target] | None = None,
    ) -> None:
        super().__init__()
        if not 0 <= dropout < 1:
            raise ConfigError(f"dropout={dropout} is outside [0, 1)")
        if targets is None and (isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1):
            raise ConfigError(f"num_labels={num_labels!r} must be an int >= 1 (1 means regression)")
        self.embedding = embedding
        self.token_transform = token_transform
        self.dropout = nn.Dropout(dropout)
        self.feature_dim = feature_dim
        self.head: nn.Module = (
            MultiTaskHeads(feature_dim, targets, HEAD_INIT_STD)
            if targets
            else linear_head(feature_dim, num_labels, HEAD_INIT_STD)
        )
        self.num_labels = self.head.num_outputs if isinstance(self.head, MultiTaskHeads) else num_labels

    @property
    def is_regression(self) -> bool:
        return not isinstance(self.head, MultiTaskHeads) and self.num_labels == 1

    @abstractmethod
    def features(self, embedded: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(B, T, E)`` embedded word pieces (zero at padding) and the ``(B, T)`` mask -> ``(B, F)`` sentence
        features and named hidden tensors for the output (each subclass reads the words its own way)."""

    def index_transforms(self) -> list[nn.Module]:
        """The token transform, if set (:mod:`embreg.models.transform_sites`)."""
        return present_transforms([self.token_transform])

    def draw_index_transforms(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` (trimmed) with ``input_ids`` as this training step swaps them."""
        drawn = dict(trim_padding(batch))
        drawn["input_ids"] = swap_word_pieces(
            self.token_transform, drawn["input_ids"], drawn.get("attention_mask"), self.training
        )
        return drawn

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        batch = trim_padding(batch)
        mask = batch["attention_mask"]
        ids = swap_word_pieces(self.token_transform, batch["input_ids"], mask, self.training)
        embedded = self.embedding(ids) * mask.unsqueeze(-1).to(self.embedding.weight.dtype)
        features, hidden = self.features(embedded, mask)
        predictions = self.head(self.dropout(features))
        if self.is_regression:
            predictions = predictions.squeeze(-1)
        return ModelOutput(predictions, {"features": features, **hidden})

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Cross-entropy (classification), MSE (regression) or the weighted multi-task loss."""
        return head_loss(self.head, output.predictions, batch["labels"], regression=self.is_regression)


def token_table(config: Any, context: Any, model: str) -> nn.Embedding:
    """The token table of ``model``: MiniLM's token embeddings (``init_embeddings: minilm``) or a random
    ``N(0, 1)`` table of ``config.embedding_dim`` columns (``random``), with one row per tokenizer id."""
    num_ids = context.num_ids("token")
    if config.init_embeddings == "minilm":
        weight = minilm_token_embeddings(config.pretrained, num_ids, progress=context.recipe.train.progress)
        return nn.Embedding.from_pretrained(weight, freeze=False)
    if config.init_embeddings != "random":
        raise ConfigError(f"model.init_embeddings={config.init_embeddings!r} must be 'minilm' or 'random' ({model})")
    return nn.Embedding(num_ids, config.embedding_dim)


@dataclass
class TokenModelConfig:
    """The settings every word-piece text model shares.

    Attributes:
        pretrained: the checkpoint whose tokenizer splits the texts (the task reads it) and, with
            ``init_embeddings: minilm``, whose token embeddings start the table.
        init_embeddings: ``minilm``: the table starts from the packaged MiniLM's token-embedding matrix (30,522 x
            384). That source is reachable offline (the checkpoint the task's tokenizer already comes from, in the
            cache), and its rows are indexed by the very WordPiece ids the texts are tokenised into, so no
            vocabulary has to be mapped (word vectors trained with gensim on the Wikipedia extract would be
            word-level, and most word pieces would have no vector). ``random``: ``N(0, 1)`` rows of
            ``embedding_dim`` columns.
        embedding_dim: width of a ``random`` table (MiniLM's rows are 384 wide; setting it with ``minilm`` is
            refused).
        dropout: dropout on the sentence features before the head (Kim 2014: 0.5).
    """

    pretrained: str = "all-minilm-l6-v2"
    init_embeddings: Literal["minilm", "random"] = "minilm"
    embedding_dim: int = 128
    dropout: float = 0.5

    def __post_init__(self) -> None:
        self.pretrained = recorded_checkpoint(self.pretrained)
        if self.init_embeddings not in ("minilm", "random"):
            raise ConfigError(f"model.init_embeddings={self.init_embeddings!r} must be 'minilm' or 'random'")
        default = next(f.default for f in fields(TokenModelConfig) if f.name == "embedding_dim")
        if self.init_embeddings == "minilm" and self.embedding_dim != default:
            raise ConfigError(
                f"model.embedding_dim={self.embedding_dim} is the width of a random table only: with "
                f"init_embeddings: minilm the rows are the checkpoint's; set model.init_embeddings=random or leave "
                f"embedding_dim at {default}"
            )
        _positive("embedding_dim", self.embedding_dim)
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise ConfigError(f"model.dropout={self.dropout!r} is outside [0, 1)")


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"model.{name}={value!r} must be an int >= 1")

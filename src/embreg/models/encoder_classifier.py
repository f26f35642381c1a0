"""A pretrained encoder with a fresh classification or regression head, following embreg's model protocol.

``EncoderClassifier(encoder, num_labels)`` wraps a Hugging Face BERT-family encoder (``BertModel``, ...): the
forward pass runs the encoder on ``batch["input_ids"]`` / ``["attention_mask"]`` (/ ``["token_type_ids"]``),
pools its last states, applies dropout and a linear head initialised N(0, 0.02^2) with zero bias (as in
lnsr-noise-stability-bert.txt, Appendix A), and returns every hidden state ``h_0..h_L`` in ``output.hidden`` for
the noise-stability regularisers. ``loss`` is cross-entropy (classification) or mean squared error (regression,
``num_labels == 1``). Padding columns that no example of a batch uses are cut before the encoder runs, so a batch
costs what its longest text costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.models.hidden_states import hidden_states_dict
from embreg.models.output import ModelOutput
from embreg.models.pretrained import recorded_checkpoint
from embreg.models.text_heads import MultiTaskHeads, Target, head_loss, linear_head, num_task_labels, task_targets
from embreg.models.transform_sites import present_transforms
from embreg.models.word_piece_swaps import swap_word_pieces
from embreg.registry import register

__all__ = ["EncoderClassifier", "encode_texts", "tokenize_texts", "swap_word_pieces", "trim_padding"]

TEXT_KEYS = ("input_ids", "attention_mask", "token_type_ids")


def encode_texts(tokenizer: Any, texts: Sequence[str], max_length: int) -> dict[str, torch.Tensor]:
    """Tokenise ``texts`` into padded int64 tensors ``(N, T)`` with ``T <= max_length`` (longest text, truncated).

    Args:
        tokenizer: a Hugging Face (fast) tokenizer.
        texts: the texts.
        max_length: tokens per text including ``[CLS]`` and ``[SEP]`` (>= 2).

    Returns:
        ``{"input_ids", "attention_mask"[, "token_type_ids"]}``.
    """
    encoded = tokenize_texts(tokenizer, texts, max_length)
    return {k: encoded[k].long() for k in TEXT_KEYS if k in encoded}


def tokenize_texts(tokenizer: Any, texts: Sequence[str], max_length: int) -> Any:
    """The tokenizer's ``BatchEncoding`` that :func:`encode_texts` takes its tensors from (with a fast tokenizer,
    ``encodings[i].overflowing`` holds the pieces text ``i`` lost to the cut at ``max_length``).

    Raises:
        ConfigError: ``max_length < 2``.
    """
    if max_length < 2:
        raise ConfigError(f"max_length={max_length} must be >= 2 (room for [CLS] and [SEP])")
    return tokenizer(list(texts), truncation=True, max_length=max_length, padding="longest", return_tensors="pt")


def trim_padding(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch with the trailing token columns that are padding in every row removed (right padding).

    Example:
        >>> b = {"input_ids": torch.tensor([[5, 6, 0], [7, 0, 0]]),
        ...      "attention_mask": torch.tensor([[1, 1, 0], [1, 0, 0]])}
        >>> trim_padding(b)["input_ids"].tolist()
        [[5, 6], [7, 0]]
    """
    mask = batch["attention_mask"]
    length = int(mask.sum(dim=1).max().item()) if mask.numel() else 0
    if length == mask.shape[1]:
        return batch
    return {k: (v[:, : max(length, 1)] if k in TEXT_KEYS else v) for k, v in batch.items()}


class EncoderClassifier(nn.Module):
    """Encoder + pooling + dropout + linear head; ``forward(batch) -> ModelOutput`` with all hidden states.

    Args:
        encoder: a Hugging Face BERT-family encoder (has ``embeddings``, ``encoder.layer``, ``config``).
        num_labels: classes (>= 2), or 1 for regression.
        pooling: ``"mean"`` (mean of the non-padding token states; how all-MiniLM-L6-v2 was trained) or ``"cls"``
            (the encoder's pooler on ``[CLS]`` when it has one, else the ``[CLS]`` state; BERT's recipe).
        dropout: dropout before the head (``None``: the encoder's ``hidden_dropout_prob``).
        init_std: standard deviation of the head's normal initialisation.
        token_transform: ids -> ids module applied to the input word pieces in training (e.g. ``SSE(vocab, p)``;
            special tokens and padding are kept).
        targets: several targets (multi-task learning, :mod:`embreg.models.text_heads`): one head each on the
            pooled states (``num_labels`` is then their total of outputs), the loss their weighted sum.

    Shapes: ``batch["input_ids"]`` ``(B, T)``; predictions ``(B, C)`` logits, or ``(B,)`` for regression; hidden
    states ``(B, T', D)`` with ``T' <= T`` after padding is trimmed.

    Example:
        >>> from transformers import BertConfig, BertModel
        >>> cfg = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
        ...                  intermediate_size=16)
        >>> model = EncoderClassifier(BertModel(cfg), num_labels=3)
        >>> batch = {"input_ids": torch.tensor([[2, 5, 3, 0]]), "attention_mask": torch.tensor([[1, 1, 1, 0]]),
        ...          "labels": torch.tensor([1])}
        >>> out = model(batch)
        >>> out.predictions.shape, len(out.hidden), model.loss(batch, out).dim()
        (torch.Size([1, 3]), 3, 0)
    """

    def __init__(
        self,
        encoder: nn.Module,
        num_labels: int,
        *,
        pooling: Literal["mean", "cls"] = "mean",
        dropout: float | None = None,
        init_std: float = 0.02,
        token_transform: nn.Module | None = None,
        targets: Sequence[Target] | None = None,
    ) -> None:
        super().__init__()
        if targets:
            num_labels = sum(t.num_labels for t in targets)
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
            raise ConfigError(f"num_labels={num_labels!r} must be an int >= 1 (1 means regression)")
        if pooling not in ("mean", "cls"):
            raise ConfigError(f"pooling={pooling!r} must be 'mean' or 'cls'")
        config = getattr(encoder, "config", None)
        hidden_size = getattr(config, "hidden_size", None)
        if hidden_size is None or not isinstance(
            getattr(getattr(encoder, "encoder", None), "layer", None), nn.ModuleList
        ):
            raise ConfigError(
                f"{type(encoder).__name__} is not a BERT-family encoder (needs config.hidden_size and encoder.layer)"
            )
        p = float(getattr(config, "hidden_dropout_prob", 0.1)) if dropout is None else dropout
        if not 0 <= p < 1:
            raise ConfigError(f"dropout={p} is outside [0, 1)")
        if init_std <= 0:
            raise ConfigError(f"init_std={init_std} must be > 0")
        self.encoder = encoder
        self.num_labels = num_labels
        self.pooling = pooling
        pooler = getattr(encoder, "pooler", None)
        if pooling == "mean" and isinstance(pooler, nn.Module):
            pooler.requires_grad_(False)  # never on the loss's path: no gradient, no optimizer state, no DDP search
        self.dropout = nn.Dropout(p)
        self.head: nn.Module = (
            MultiTaskHeads(hidden_size, targets, init_std)
            if targets
            else linear_head(hidden_size, num_labels, init_std)
        )
        self.token_transform = token_transform

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1 and not isinstance(self.head, MultiTaskHeads)

    @property
    def num_layers(self) -> int:
        layers = getattr(getattr(self.encoder, "encoder", None), "layer", None)
        if not isinstance(layers, nn.ModuleList):  # __init__ checked it; only a later swap of the encoder gets here
            raise ConfigError(f"{type(self.encoder).__name__} has no encoder.layer list")
        return len(layers)

    def pool(self, last_hidden: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """``(B, T, D) -> (B, D)`` by the configured pooling."""
        if self.pooling == "cls":
            pooler = getattr(self.encoder, "pooler", None)
            return pooler(last_hidden) if pooler is not None else last_hidden[:, 0]
        if attention_mask is None:
            return last_hidden.mean(dim=1)
        weights = attention_mask[:, : last_hidden.shape[1]].to(last_hidden.dtype).unsqueeze(-1)
        return (last_hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)

    def predict_from_hidden(self, last_hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The head on the last layer's states: logits ``(B, C)`` or regression outputs ``(B,)``."""
        logits = self.head(self.dropout(self.pool(last_hidden, batch.get("attention_mask"))))
        return logits.squeeze(-1) if self.is_regression else logits

    def swap_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """``token_transform`` on the word pieces of ``(B, T)`` ids, in training only (SSE on input embeddings,
        sse-stochastic-shared-embeddings.txt, Sec. 4.3); ``[CLS]`` (position 0), the last attended token
        (``[SEP]``) and padding keep their ids."""
        return swap_word_pieces(self.token_transform, input_ids, attention_mask, self.training)

    def index_transforms(self) -> list[nn.Module]:
        """The token transform, if set (:mod:`embreg.models.transform_sites`)."""
        return present_transforms([self.token_transform])

    def draw_index_transforms(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` (trimmed as :meth:`forward` trims it) with ``input_ids`` as this training step swaps them, on
        the batch's device (:mod:`embreg.models.transform_sites`)."""
        drawn = dict(trim_padding(batch))
        if "input_ids" in drawn:
            drawn["input_ids"] = self.swap_tokens(drawn["input_ids"], drawn.get("attention_mask"))
        return drawn

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        batch = trim_padding(batch)
        inputs = {k: batch[k] for k in TEXT_KEYS if k in batch}
        if "input_ids" in inputs:
            inputs["input_ids"] = self.swap_tokens(inputs["input_ids"], inputs.get("attention_mask"))
        out = self.encoder(**inputs, output_hidden_states=True, return_dict=True)
        states = out.hidden_states
        predictions = self.predict_from_hidden(states[-1], batch)
        return ModelOutput(predictions, hidden_states_dict(states))

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Cross-entropy against ``batch["labels"]`` (class ids), MSE against float targets, or the weighted
        multi-task loss (:meth:`~embreg.models.text_heads.MultiTaskHeads.loss`)."""
        return head_loss(self.head, output.predictions, batch["labels"], regression=self.is_regression)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, num_labels: int, **kwargs: Any) -> tuple[EncoderClassifier, Any]:
        """``(EncoderClassifier, tokenizer)`` for a registry name (``"all-minilm-l6-v2"``) or a local checkpoint.

        Example:
            >>> model, tokenizer = EncoderClassifier.from_pretrained("all-minilm-l6-v2", 2)  # doctest: +SKIP
        """
        from embreg.models.pretrained import load_pretrained

        encoder, tokenizer = load_pretrained(name_or_path)
        return cls(encoder, num_labels, **kwargs), tokenizer


@dataclass
class EncoderClassifierConfig:
    """The pretrained encoder and its head (``model: {name: encoder-classifier, ...}``).

    Attributes:
        pretrained: a registry name (``all-minilm-l6-v2``), a local Hugging Face checkpoint directory, or an
            ``mlm`` run directory (the encoder of its best checkpoint: :mod:`embreg.models.run_encoder`).
        pooling: ``mean`` or ``cls`` (see :class:`EncoderClassifier`).
        dropout: dropout before the head (``null``: the encoder's hidden dropout).
        init_std: standard deviation of the head's initialisation (lnsr-noise-stability-bert.txt, Sec. 4.3: 0.02).
    """

    pretrained: str = "all-minilm-l6-v2"
    pooling: Literal["mean", "cls"] = "mean"
    dropout: float | None = None
    init_std: float = 0.02

    def __post_init__(self) -> None:
        self.pretrained = recorded_checkpoint(self.pretrained)
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ConfigError(f"model.dropout={self.dropout} is outside [0, 1)")
        if self.init_std <= 0:
            raise ConfigError(f"model.init_std={self.init_std} must be > 0")


@register(
    "model",
    "encoder-classifier",
    config=EncoderClassifierConfig,
    tasks=("classification", "regression"),
    kinds=("token",),
    embeddings=("uniform",),
    provides=("layer_stack", "linear_layers", "pretrained"),
    summary="pretrained BERT-family encoder + pooling + linear head",
    reference="lnsr-noise-stability-bert.txt, Sec. 4",
)
def build_encoder_classifier(config: EncoderClassifierConfig, context: Any) -> EncoderClassifier:
    """A fresh head on the pretrained encoder, for ``context.prepared.task.num_labels`` outputs."""
    from embreg.models.pretrained import load_pretrained

    encoder, _ = load_pretrained(config.pretrained, progress=context.recipe.train.progress)
    return EncoderClassifier(
        encoder,
        num_task_labels(context) or 1,
        pooling=config.pooling,
        dropout=config.dropout,
        init_std=config.init_std,
        token_transform=context.transforms.get("token"),
        targets=task_targets(context),
    )

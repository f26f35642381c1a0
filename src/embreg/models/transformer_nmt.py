"""An encoder-decoder Transformer for translation, built from ``torch.nn`` Transformer layers.

Reference: sse-stochastic-shared-embeddings.txt, Sec. 4.3 and Table 5 (a 6-layer Transformer, dropout 0.1, label
smoothing 0.1, SSE-SE with p0 = 0.01 on the encoder and decoder embeddings); the architecture is Vaswani et al.'s
(post-norm layers, sinusoidal positions, embeddings scaled by ``sqrt(d_model)``, the decoder's output tied to its
input embedding); nlp-best-practices.txt ("Beam search", "Coverage") for decoding (:mod:`embreg.nn.decoding`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import ConfigError, DataError
from embreg.models import nmt_incremental
from embreg.models.nmt_incremental import DecoderState
from embreg.models.output import ModelOutput
from embreg.models.step_key import step_key
from embreg.models.transform_sites import is_passed_through, present_transforms
from embreg.nn import TiedOutput
from embreg.nn.label_smoothed_loss import label_smoothed_cross_entropy
from embreg.nn.packed_dropout import PackedDropout
from embreg.registry import register

__all__ = [
    "SPECIAL_IDS",
    "NUM_SPECIAL",
    "CrossAttentionDecoderLayer",
    "TransformerTranslator",
    "TransformerTranslatorConfig",
    "sinusoidal_positions",
    "transform_regular_ids",
]

SPECIAL_IDS = {"pad": 0, "bos": 1, "eos": 2, "unk": 3}
"""The special token ids of every translation vocabulary (:mod:`embreg.data.bpe`): ``<pad>``, ``<s>``, ``</s>``,
``<unk>``; regular tokens follow from :data:`NUM_SPECIAL`."""
NUM_SPECIAL = len(SPECIAL_IDS)


def sinusoidal_positions(length: int, dim: int) -> torch.Tensor:
    """Vaswani et al.'s positional encodings ``(length, dim)``: ``sin`` on even, ``cos`` on odd features.

    Example:
        >>> sinusoidal_positions(3, 4)[0].tolist()
        [0.0, 1.0, 0.0, 1.0]
    """
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    scale = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * scale)
    table[:, 1::2] = torch.cos(position * scale)[:, : dim // 2]
    return table


def transform_regular_ids(ids: torch.Tensor, transform: nn.Module) -> torch.Tensor:
    """``ids`` with ``transform`` applied to the regular tokens only, in their own id space ``[0, V - 4)``.

    Special ids (``<pad>``, ``<s>``, ``</s>``, ``<unk>``) are neither swapped nor drawn: the transform sees the
    regular ids shifted down by :data:`NUM_SPECIAL` and its draws are shifted back.

    Example:
        >>> from embreg.sse import SSE
        >>> ids = torch.tensor([[1, 4, 5, 2, 0]])
        >>> out = transform_regular_ids(ids, SSE(3, p=1.0, seed=0))
        >>> out[0, [0, 3, 4]].tolist(), bool((out[0, 1:3] >= 4).all())
        ([1, 2, 0], True)
    """
    regular = ids >= NUM_SPECIAL
    drawn = ids.clone()
    drawn[regular] = transform(ids[regular] - NUM_SPECIAL) + NUM_SPECIAL
    return drawn


class CrossAttentionDecoderLayer(nn.TransformerDecoderLayer):
    """``nn.TransformerDecoderLayer`` (post-norm) whose forward can keep its cross-attention weights.

    The parameters and sub-modules are those of ``nn.TransformerDecoderLayer``; this forward runs the same post-norm
    computation (self-attention, cross-attention, feed-forward, each ``norm(x + dropout(block(x)))``) and, with
    ``keep_attention=True``, asks the cross-attention for its weights averaged over the heads and stores them in
    :attr:`cross_attention` ``(B, T, S)``.

    Example:
        >>> layer = CrossAttentionDecoderLayer(8, 2, 16, 0.0, batch_first=True).eval()
        >>> out = layer(torch.randn(2, 3, 8), torch.randn(2, 5, 8), keep_attention=True)
        >>> out.shape, layer.cross_attention.shape
        (torch.Size([2, 3, 8]), torch.Size([2, 3, 5]))
    """

    cross_attention: torch.Tensor | None = None

    def forward(  # type: ignore[override]
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
        keep_attention: bool = False,
    ) -> torch.Tensor:
        x = tgt
        attended = self.self_attn(
            x, x, x, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask, need_weights=False
        )
        x = self.norm1(x + self.dropout1(attended[0]))
        crossed, weights = self.multihead_attn(
            x,
            memory,
            memory,
            key_padding_mask=memory_key_padding_mask,
            need_weights=keep_attention,
            average_attn_weights=True,
        )
        self.cross_attention = weights if keep_attention else None
        x = self.norm2(x + self.dropout2(crossed))
        return self.norm3(x + self._ff_block(x))


def _pack_dropouts(model: nn.Module) -> None:
    """Every ``nn.Dropout`` inside ``model`` (the embeddings' and those of the torch layers) becomes a
    :class:`~embreg.nn.packed_dropout.PackedDropout` of the same ``p``: the same regulariser, half the mask cost on
    a CPU. Dropout modules hold no parameters, so the state dict is unchanged."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Dropout:
                setattr(module, name, PackedDropout(child.p))


class TransformerTranslator(nn.Module):
    """Encoder-decoder Transformer over source and target token ids (Vaswani et al.; SSE paper Sec. 4.3).

    Ids: :data:`SPECIAL_IDS` first in both vocabularies. Batches are dicts with ``"source"`` ``(B, S)`` (the source
    tokens and ``</s>``, right-padded) and ``"target"`` ``(B, T + 1)`` (``<s>``, the target tokens, ``</s>``,
    right-padded); the decoder reads ``target[:, :-1]`` and predicts ``target[:, 1:]``. Padding columns shared by the
    whole batch are trimmed, and padding positions are masked out of every attention (encoder self-attention, decoder
    self-attention and cross-attention key padding masks; a causal mask in the decoder).

    Index transforms (sse-stochastic-shared-embeddings.txt, eq. 5): ``source_transform`` acts on the source ids the
    encoder embeds and ``target_transform`` on the target ids the decoder embeds (teacher forcing), in training
    only, on the regular tokens only (:func:`transform_regular_ids`); the labels the loss reads stay the true next
    tokens. They are drawn once per step (every forward pass of one batch in one step sees the same swaps).

    Decoding: :meth:`encode` and :meth:`decode_step` implement :class:`embreg.nn.decoding.EncoderDecoder`; the
    cross-attention that the coverage penalty reads is the *last decoder layer's*, averaged over its heads.
    :meth:`start_decoding`, :meth:`decode_next` and :meth:`reorder` add its incremental extension
    (:class:`embreg.nn.decoding.IncrementalDecoder`): cached self-attention keys and values of the prefix and
    cross-attention keys and values of the memory projected once per source (:mod:`embreg.models.nmt_incremental`),
    eval mode only (dropout off), which the searches use automatically.

    Args:
        source_vocab, target_vocab: vocabulary sizes (specials included).
        d_model, heads, encoder_layers, decoder_layers, feedforward, dropout: the Transformer's sizes.
        share_embeddings: one table for source and target (needs one joint vocabulary).
        label_smoothing: ``epsilon`` of the label-smoothed cross-entropy (``0``: plain).
        max_positions: longest sequence the positional table covers.
        source_transform, target_transform: ids -> ids modules over the ``V - 4`` regular ids (``None``: none).

    Example:
        >>> model = TransformerTranslator(20, 20, d_model=16, heads=2, encoder_layers=1, decoder_layers=1,
        ...                               feedforward=32, dropout=0.1)
        >>> batch = {"source": torch.tensor([[5, 6, 2, 0]]), "target": torch.tensor([[1, 7, 8, 2, 0]])}
        >>> out = model(batch)
        >>> out.predictions.shape, model.loss(batch, out).item() > 0
        (torch.Size([1, 3, 20]), True)
    """

    bos_id = SPECIAL_IDS["bos"]
    eos_id = SPECIAL_IDS["eos"]
    pad_id = SPECIAL_IDS["pad"]
    positions: torch.Tensor  # a registered buffer

    def __init__(
        self,
        source_vocab: int,
        target_vocab: int,
        *,
        d_model: int = 256,
        heads: int = 4,
        encoder_layers: int = 3,
        decoder_layers: int = 3,
        feedforward: int = 1024,
        dropout: float = 0.1,
        share_embeddings: bool = False,
        label_smoothing: float = 0.0,
        max_positions: int = 512,
        source_transform: nn.Module | None = None,
        target_transform: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if min(source_vocab, target_vocab) <= NUM_SPECIAL:
            raise ConfigError(
                f"vocabularies of {source_vocab} and {target_vocab} ids leave no regular token after the "
                f"{NUM_SPECIAL} special ids"
            )
        if d_model % heads:
            raise ConfigError(f"model.d_model={d_model} must be a multiple of model.heads={heads}")
        if share_embeddings and source_vocab != target_vocab:
            raise ConfigError(
                f"model.share_embeddings=true needs one joint vocabulary, got {source_vocab} source and "
                f"{target_vocab} target ids; set data.joint_vocab=true"
            )
        self.d_model = d_model
        self.label_smoothing = label_smoothing
        self.source_embedding = nn.Embedding(source_vocab, d_model, padding_idx=self.pad_id)
        self.target_embedding = (
            self.source_embedding if share_embeddings else nn.Embedding(target_vocab, d_model, padding_idx=self.pad_id)
        )
        for table in {id(t): t for t in (self.source_embedding, self.target_embedding)}.values():
            nn.init.normal_(table.weight, 0.0, d_model**-0.5)
            with torch.no_grad():
                table.weight[self.pad_id].zero_()
        self.register_buffer("positions", sinusoidal_positions(max_positions, d_model), persistent=False)
        self.embedding_dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(d_model, heads, feedforward, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, encoder_layers, enable_nested_tensor=False)
        self.decoder_layers = nn.ModuleList(
            CrossAttentionDecoderLayer(d_model, heads, feedforward, dropout, batch_first=True)
            for _ in range(decoder_layers)
        )
        self.output = TiedOutput(self.target_embedding)
        _pack_dropouts(self)
        self.source_transform = source_transform
        self.target_transform = target_transform
        self._drawn: dict[str, tuple] = {}

    # --------------------------------------------------------------------------------------- index transforms
    def _step_ids(self, batch: dict[str, torch.Tensor], key: str, transform: nn.Module | None) -> torch.Tensor:
        ids = batch[key]
        if transform is None or not self.training or is_passed_through(transform):
            return ids
        step = step_key(batch, self)
        cached = self._drawn.get(key)
        if cached is not None and cached[0] is ids and cached[1] == step:
            return cached[2]
        drawn = transform_regular_ids(ids, transform)
        self._drawn[key] = (ids, step, drawn)
        return drawn

    def index_transforms(self) -> list[nn.Module]:
        """The source and target transforms that are set (:mod:`embreg.models.transform_sites`)."""
        return present_transforms([self.source_transform, self.target_transform])

    def draw_index_transforms(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` with ``source`` and ``target`` as this training step draws them (the decoder input; the loss
        reads ``batch["labels"]`` when present, which this adds with the true targets)."""
        drawn = dict(batch)
        drawn["source"] = self._step_ids(batch, "source", self.source_transform)
        drawn["target"] = self._step_ids(batch, "target", self.target_transform)
        drawn["labels"] = batch.get("labels", batch["target"])
        return drawn

    # ---------------------------------------------------------------------------------------------- forward
    def _embed(self, table: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
        length = ids.shape[1]
        if length > self.positions.shape[0]:
            raise DataError(f"a sequence of {length} tokens is longer than the model's {self.positions.shape[0]}")
        return self.embedding_dropout(table(ids) * math.sqrt(self.d_model) + self.positions[:length])

    def encode(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``source (B, S)`` -> ``memory (B, S, D)`` and the padding mask ``(B, S)`` (True at ``<pad>``)."""
        padding = source == self.pad_id
        memory = self.encoder(self._embed(self.source_embedding, source), src_key_padding_mask=padding)
        return memory, padding

    def decode(
        self, prefix: torch.Tensor, memory: torch.Tensor, source_padding: torch.Tensor, keep_attention: bool = False
    ) -> torch.Tensor:
        """Decoder states ``(B, T, D)`` of target ids ``prefix (B, T)`` (causal, padding masked)."""
        length = prefix.shape[1]
        causal = torch.triu(torch.ones(length, length, dtype=torch.bool, device=prefix.device), diagonal=1)
        x = self._embed(self.target_embedding, prefix)
        padding = prefix == self.pad_id
        last = len(self.decoder_layers) - 1
        for index, layer in enumerate(self.decoder_layers):
            x = layer(x, memory, causal, padding, source_padding, keep_attention=keep_attention and index == last)
        return x

    def decode_step(
        self, prefix: torch.Tensor, memory: torch.Tensor, source_padding: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Next-token log-probabilities ``(N, V)`` after ``prefix (N, t)`` and the last decoder layer's cross-
        attention of the last position, averaged over heads ``(N, S)``."""
        states = self.decode(prefix, memory, source_padding, keep_attention=True)
        attention = cast(CrossAttentionDecoderLayer, self.decoder_layers[-1]).cross_attention
        assert attention is not None  # keep_attention=True stored it
        return F.log_softmax(self.output(states[:, -1]).float(), dim=-1), attention[:, -1]

    # ------------------------------------------------------------------- incremental decoding (eval mode only)
    def start_decoding(self, memory: torch.Tensor, source_padding: torch.Tensor) -> DecoderState:
        """Cached decoding state of one row per source (:func:`embreg.models.nmt_incremental.start_decoding`)."""
        return nmt_incremental.start_decoding(self, memory, source_padding)

    def decode_next(self, tokens: torch.Tensor, state: DecoderState) -> tuple[torch.Tensor, torch.Tensor, DecoderState]:
        """What :meth:`decode_step` gives for the prefix ``state`` holds plus ``tokens (N,)``, from cached keys and
        values (:func:`embreg.models.nmt_incremental.decode_next`; dropout off)."""
        return nmt_incremental.decode_next(self, tokens, state)

    def reorder(self, state: DecoderState, rows: torch.Tensor) -> DecoderState:
        """The cached state of rows ``rows`` (:func:`embreg.models.nmt_incremental.reorder`)."""
        return nmt_incremental.reorder(state, rows)

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        """Logits ``(B, T, V)`` of the next target tokens (teacher forcing)."""
        source = self._step_ids(batch, "source", self.source_transform)
        target = self._step_ids(batch, "target", self.target_transform)
        if source.dim() != 2 or target.dim() != 2 or target.shape[1] < 2:
            raise DataError(
                f"batch['source'] must be (B, S) and batch['target'] (B, T + 1) with T >= 1, got "
                f"{tuple(source.shape)} and {tuple(target.shape)}"
            )
        source_len = int((batch["source"] != self.pad_id).sum(dim=1).max())
        target_len = int((batch["target"] != self.pad_id).sum(dim=1).max())
        source, target = source[:, : max(source_len, 1)], target[:, : max(target_len, 2)]
        memory, padding = self.encode(source)
        states = self.decode(target[:, :-1], memory, padding)
        return ModelOutput(predictions=self.output(states), hidden={"source_ids": source, "target_ids": target})

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Label-smoothed cross-entropy of the next target tokens, mean over the non-padding positions
        (:func:`embreg.nn.label_smoothed_loss.label_smoothed_cross_entropy`)."""
        logits = output.predictions
        labels = batch.get("labels", batch["target"])[:, 1 : logits.shape[1] + 1]
        return label_smoothed_cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), self.label_smoothing, self.pad_id
        )


@dataclass
class TransformerTranslatorConfig:
    """``model: {name: transformer-nmt, d_model: 128, ...}``: the encoder-decoder's sizes.

    The defaults are a small CPU size (2 + 2 layers, width 128); the shipped recipe ``translation`` widens it to
    d_model 256 and feed-forward 1024, and the paper-sized preset (Vaswani et al.'s base, as in the SSE paper's
    Table 5: 6 + 6 layers, d_model 512, 8 heads, feed-forward 2048, dropout 0.1, label smoothing 0.1) is the recipe
    ``translation-base`` for a GPU.

    Attributes:
        d_model, heads, encoder_layers, decoder_layers, feedforward: sizes.
        dropout: on the embeddings and inside every layer.
        label_smoothing: ``epsilon`` of the label-smoothed loss, in ``[0, 1)``.
        share_embeddings: one embedding table for source and target (needs ``data.joint_vocab: true``); the
            decoder's output is always tied to the target table.
        max_positions: the positional table's length (>= the data's longest sequence).
    """

    d_model: int = 128
    heads: int = 4
    encoder_layers: int = 2
    decoder_layers: int = 2
    feedforward: int = 512
    dropout: float = 0.1
    label_smoothing: float = 0.1
    share_embeddings: bool = False
    max_positions: int = 256

    def __post_init__(self) -> None:
        for name in ("d_model", "heads", "encoder_layers", "decoder_layers", "feedforward", "max_positions"):
            if getattr(self, name) < 1:
                raise ConfigError(f"model.{name}={getattr(self, name)} must be >= 1")
        if self.d_model % self.heads:
            raise ConfigError(f"model.d_model={self.d_model} must be a multiple of model.heads={self.heads}")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"model.dropout={self.dropout} is outside [0, 1)")
        if not 0 <= self.label_smoothing < 1:
            raise ConfigError(f"model.label_smoothing={self.label_smoothing} is outside [0, 1)")


@register(
    "model",
    "transformer-nmt",
    config=TransformerTranslatorConfig,
    tasks=("translation",),
    kinds=("source", "target"),
    embeddings=("uniform",),
    provides=(),
    summary="encoder-decoder Transformer (torch.nn layers) with tied output, label smoothing and beam search",
    reference="sse-stochastic-shared-embeddings.txt, Sec. 4.3 and Table 5",
)
def build_transformer_nmt(config: TransformerTranslatorConfig, context: Any) -> TransformerTranslator:
    """The translator over the task's source and target vocabularies, with the recipe's index transforms."""
    prepared = context.prepared
    return TransformerTranslator(
        prepared.source_vocab_size,
        prepared.target_vocab_size,
        d_model=config.d_model,
        heads=config.heads,
        encoder_layers=config.encoder_layers,
        decoder_layers=config.decoder_layers,
        feedforward=config.feedforward,
        dropout=config.dropout,
        share_embeddings=config.share_embeddings,
        label_smoothing=config.label_smoothing,
        max_positions=config.max_positions,
        source_transform=context.transforms.get("source"),
        target_transform=context.transforms.get("target"),
    )

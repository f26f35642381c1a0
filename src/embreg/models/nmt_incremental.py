"""Incremental (cached) decoding of :class:`embreg.models.transformer_nmt.TransformerTranslator`.

One call of :func:`decode_next` runs the decoder over ONE new target position per row, reading what earlier calls
cached in a :class:`DecoderState`: every decoder layer's self-attention keys and values of the prefix, and its
cross-attention keys and values of the memory, projected once per source by :func:`start_decoding`. Because the
decoder is causal and its layers are post-norm (Vaswani et al. 2017; sse-stochastic-shared-embeddings.txt,
Sec. 4.3), a position's states depend on earlier positions only, so this computes what
``TransformerTranslator.decode_step`` computes on the whole prefix (the same embedding scale and sinusoidal position
of the current step, the ``1 / sqrt(d_head)`` attention scale, the source padding mask, the head-averaged
cross-attention of the last decoder layer) in ``O(t)`` instead of ``O(t^2)`` work per step; the two agree to
floating-point rounding (tests/models/test_nmt_incremental.py).

It is the eval-mode function: dropout is off (decoding always runs the model in eval mode, and
:func:`start_decoding` refuses a model in training mode). Prefix tokens are never ``<pad>`` (the searches never feed
it), so no target padding mask is needed.

Example:
    >>> from embreg.models.transformer_nmt import TransformerTranslator
    >>> model = TransformerTranslator(12, 12, d_model=16, heads=2, encoder_layers=1, decoder_layers=2,
    ...                               feedforward=32, dropout=0.0).eval()
    >>> memory, padding = model.encode(torch.tensor([[5, 6, 2]]))
    >>> state = start_decoding(model, memory, padding)
    >>> log_probs, attention, state = decode_next(model, torch.tensor([model.bos_id]), state)
    >>> log_probs.shape, attention.shape, state.step
    (torch.Size([1, 12]), torch.Size([1, 3]), 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, cast

import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import DataError

__all__ = ["DecoderState", "DecodingModel", "start_decoding", "decode_next", "reorder"]


class DecodingModel(Protocol):
    """What incremental decoding reads of a :class:`~embreg.models.transformer_nmt.TransformerTranslator`.

    Attributes:
        training: the module's mode (decoding refuses training mode).
        d_model: ``D``, the embedding scale is ``sqrt(D)``.
        positions: ``(P, D)`` sinusoidal positional table.
        target_embedding: target ids ``(N,)`` -> ``(N, D)``.
        decoder_layers: post-norm ``nn.TransformerDecoderLayer`` modules, in order.
        output: ``(N, D)`` -> logits ``(N, V)``.
    """

    @property
    def training(self) -> bool: ...
    @property
    def d_model(self) -> int: ...
    @property
    def positions(self) -> torch.Tensor: ...
    @property
    def target_embedding(self) -> nn.Module: ...
    @property
    def decoder_layers(self) -> nn.ModuleList: ...
    @property
    def output(self) -> nn.Module: ...


@dataclass
class DecoderState:
    """What :func:`decode_next` reads: the cached keys and values of ``N`` rows (hypotheses).

    Attributes:
        step: target positions decoded so far (the position of the next token; ``<s>`` is position 0).
        keys, values: per decoder layer, the self-attention keys / values of the prefix ``(N, H, step, d_head)``.
        cross_keys, cross_values: per decoder layer, the cross-attention keys / values of the memory
            ``(N, H, S, d_head)``.
        source_mask: ``(N, 1, 1, S)`` additive mask of the source: ``-inf`` at padding, ``0`` elsewhere.
    """

    step: int
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    cross_keys: list[torch.Tensor]
    cross_values: list[torch.Tensor]
    source_mask: torch.Tensor

    @property
    def rows(self) -> int:
        """``N``, the rows (hypotheses) the state holds."""
        return int(self.source_mask.shape[0])


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """``(N, L, D)`` -> ``(N, H, L, D / H)``."""
    return x.unflatten(-1, (heads, -1)).transpose(1, 2)


def _attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None):
    """Scaled dot-product attention of ONE query per row: ``query (N, H, 1, d)``, ``keys`` / ``values``
    ``(N, H, L, d)``, additive ``mask`` broadcastable to ``(N, H, 1, L)`` -> output ``(N, H * d)`` and weights
    ``(N, H, 1, L)``, as ``torch.nn.functional.multi_head_attention_forward`` computes them (the query scaled by
    ``sqrt(1 / d)`` before the product)."""
    scores = (query * math.sqrt(1.0 / query.shape[-1])) @ keys.transpose(-2, -1)
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    return (weights @ values).flatten(1), weights


def start_decoding(model: DecodingModel, memory: torch.Tensor, source_padding: torch.Tensor) -> DecoderState:
    """The state of ``B`` rows (one per source) before ``<s>``: every layer's cross-attention keys and values.

    Args:
        memory: ``(B, S, D)`` from ``model.encode``.
        source_padding: ``(B, S)`` bool, True at padding.

    Raises:
        ValueError: the model is in training mode (decoding is the eval-mode function: dropout off).
    """
    if model.training:
        raise ValueError("incremental decoding computes the eval-mode decoder (dropout off): call model.eval() first")
    cross_keys, cross_values = [], []
    for module in model.decoder_layers:
        attention = cast(nn.TransformerDecoderLayer, module).multihead_attn
        dim = attention.embed_dim
        bias = attention.in_proj_bias
        projected = F.linear(memory, attention.in_proj_weight[dim:], None if bias is None else bias[dim:])
        keys, values = projected.chunk(2, dim=-1)
        cross_keys.append(_heads(keys, attention.num_heads))
        cross_values.append(_heads(values, attention.num_heads))
    mask = torch.zeros(source_padding.shape, dtype=memory.dtype, device=memory.device)
    mask = mask.masked_fill(source_padding, -math.inf)[:, None, None, :]
    empty = [k[:, :, :0] for k in cross_keys]
    return DecoderState(0, empty, list(empty), cross_keys, cross_values, mask)


def _layer_next(
    layer: nn.TransformerDecoderLayer, x: torch.Tensor, state: DecoderState, index: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One post-norm decoder layer on the new position ``x (N, D)`` -> ``(output, cross weights (N, H, 1, S),
    keys, values)`` (the self-attention keys / values with the new position appended)."""
    own = layer.self_attn
    heads = own.num_heads
    query, key, value = F.linear(x, own.in_proj_weight, own.in_proj_bias).unflatten(-1, (3, heads, -1)).unbind(1)
    keys = torch.cat([state.keys[index], key.unsqueeze(2)], dim=2)
    values = torch.cat([state.values[index], value.unsqueeze(2)], dim=2)
    attended, _ = _attend(query.unsqueeze(2), keys, values, None)
    x = layer.norm1(x + own.out_proj(attended))
    cross = layer.multihead_attn
    dim = cross.embed_dim
    bias = cross.in_proj_bias
    query = F.linear(x, cross.in_proj_weight[:dim], None if bias is None else bias[:dim]).unflatten(-1, (heads, -1))
    crossed, weights = _attend(
        query.unsqueeze(2), state.cross_keys[index], state.cross_values[index], state.source_mask
    )
    x = layer.norm2(x + cross.out_proj(crossed))
    return layer.norm3(x + layer._ff_block(x)), weights, keys, values


def decode_next(
    model: DecodingModel, tokens: torch.Tensor, state: DecoderState
) -> tuple[torch.Tensor, torch.Tensor, DecoderState]:
    """Append ``tokens (N,)`` at position ``state.step`` and predict the next token.

    Returns:
        next-token log-probabilities ``(N, V)`` (float32), the last decoder layer's cross-attention of the new
        position averaged over its heads ``(N, S)``, and the state one position longer.

    Raises:
        DataError: the position is beyond the model's positional table.
    """
    if state.step >= model.positions.shape[0]:
        raise DataError(f"a sequence of {state.step + 1} tokens is longer than the model's {model.positions.shape[0]}")
    x = model.target_embedding(tokens) * math.sqrt(model.d_model) + model.positions[state.step]
    keys, values = [], []
    weights = torch.empty(0)
    for index, module in enumerate(model.decoder_layers):
        x, weights, layer_keys, layer_values = _layer_next(cast(nn.TransformerDecoderLayer, module), x, state, index)
        keys.append(layer_keys)
        values.append(layer_values)
    log_probs = F.log_softmax(model.output(x).float(), dim=-1)
    attention = weights.mean(dim=1).squeeze(1)
    return (
        log_probs,
        attention,
        DecoderState(state.step + 1, keys, values, state.cross_keys, state.cross_values, state.source_mask),
    )


def reorder(state: DecoderState, rows: torch.Tensor) -> DecoderState:
    """The state of rows ``rows`` ``(N',)`` (indices into the state's rows; repeats allowed): beam search's origin
    beams, or the rows still decoding."""

    def pick(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        return [t.index_select(0, rows) for t in tensors]

    return DecoderState(
        state.step,
        pick(state.keys),
        pick(state.values),
        pick(state.cross_keys),
        pick(state.cross_values),
        state.source_mask.index_select(0, rows),
    )

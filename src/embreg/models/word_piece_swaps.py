"""An index transform on the word pieces of a tokenised batch, with the special tokens and padding kept.

SSE on the input embeddings of a text model (sse-stochastic-shared-embeddings.txt, Sec. 4.3) swaps word pieces;
``[CLS]`` (position 0), ``[SEP]`` (the last attended position) and padding keep their ids, so the sentence frame
and the padding mask stay as the tokenizer made them. Every text model (the encoder classifier, the CNN, the BiLSTM
with self-attention) swaps by this one rule.
"""

from __future__ import annotations

import torch
from torch import nn

from embreg.models.transform_sites import is_passed_through

__all__ = ["swap_word_pieces"]


def swap_word_pieces(
    transform: nn.Module | None, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, training: bool
) -> torch.Tensor:
    """``transform`` on the word pieces of ``(B, T)`` ids in training; position 0 (``[CLS]``), the last attended
    token (``[SEP]``) and padding keep their ids.

    Example:
        >>> from embreg.sse import SSE
        >>> ids, mask = torch.tensor([[101, 7, 8, 102, 0]]), torch.tensor([[1, 1, 1, 1, 0]])
        >>> out = swap_word_pieces(SSE(200, p=1.0, seed=0), ids, mask, training=True)
        >>> out[0, [0, 3, 4]].tolist(), bool((out[0, 1:3] != ids[0, 1:3]).all())
        ([101, 102, 0], True)
    """
    if transform is None or not training or is_passed_through(transform):
        return input_ids
    swapped = transform(input_ids)
    keep = torch.zeros_like(input_ids, dtype=torch.bool)
    keep[:, 0] = True
    if attention_mask is not None:
        mask = attention_mask[:, : input_ids.shape[1]]
        keep |= mask == 0
        last = mask.long().sum(dim=1).clamp(min=1) - 1
        keep[torch.arange(input_ids.shape[0], device=input_ids.device), last] = True
    return torch.where(keep, input_ids, swapped)

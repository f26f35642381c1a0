"""Masked softmax and mask checks shared by the attention blocks.

Masks follow Hugging Face's ``attention_mask`` convention: ``True`` (or 1) marks a real position that may receive
weight, ``False`` (or 0) a padding position that never does. A row whose every position is masked gets all-zero
weights (and so a zero context vector), never NaN, and passes no NaN gradient back.
"""

from __future__ import annotations

import torch

from embreg.errors import EmbregError


def expand_mask(mask: torch.Tensor | None, scores: torch.Tensor, name: str = "mask") -> torch.Tensor | None:
    """``mask`` as a bool tensor broadcastable to ``scores`` ``(B, Lq, Lk)``.

    Args:
        mask: ``None``, ``(B, Lk)`` (one padding mask per sequence of keys) or ``(B, Lq, Lk)``.
        scores: the unnormalised scores ``(B, Lq, Lk)``.

    Raises:
        EmbregError: the mask's shape fits neither form.

    Example:
        >>> expand_mask(torch.tensor([[1, 0]]), torch.zeros(1, 3, 2)).shape
        torch.Size([1, 1, 2])
    """
    if mask is None:
        return None
    batch, queries, keys = scores.shape
    if mask.dim() == 2 and tuple(mask.shape) == (batch, keys):
        return mask.bool().unsqueeze(1)
    if mask.dim() == 3 and tuple(mask.shape) == (batch, queries, keys):
        return mask.bool()
    raise EmbregError(
        f"{name} has shape {tuple(mask.shape)}; expected (B, Lk) = {(batch, keys)} or (B, Lq, Lk) = "
        f"{(batch, queries, keys)}"
    )


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None, dim: int = -1) -> torch.Tensor:
    """Softmax of ``scores`` along ``dim`` where masked positions get exactly 0 and fully masked rows are all 0.

    Masked scores are replaced by the dtype's lowest finite value (not ``-inf``, whose softmax over a fully masked
    row is NaN), and the result is multiplied by the mask, so no weight and no gradient reaches a masked position.

    Args:
        scores: any shape, e.g. ``(B, Lq, Lk)``.
        mask: bool, broadcastable to ``scores``; ``True`` keeps a position (``None``: no mask).

    Example:
        >>> masked_softmax(torch.zeros(1, 2), torch.tensor([[True, False]]))
        tensor([[1., 0.]])
        >>> masked_softmax(torch.zeros(1, 2), torch.tensor([[False, False]]))
        tensor([[0., 0.]])
    """
    if mask is None:
        return torch.softmax(scores, dim=dim)
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=dim) * mask.to(scores.dtype)


def as_batched_query(query: torch.Tensor, name: str = "query") -> tuple[torch.Tensor, bool]:
    """``(B, D) -> (B, 1, D)`` (one decoder step); ``(B, Lq, D)`` unchanged. Returns the query and whether it was 2-D.

    Example:
        >>> q, step = as_batched_query(torch.zeros(2, 4))
        >>> tuple(q.shape), step
        ((2, 1, 4), True)
    """
    if query.dim() == 2:
        return query.unsqueeze(1), True
    if query.dim() == 3:
        return query, False
    raise EmbregError(f"{name} must be (B, D) or (B, Lq, D), got shape {tuple(query.shape)}")


def check_keys_values(keys: torch.Tensor, values: torch.Tensor, batch: int) -> None:
    """Raises :class:`EmbregError` unless ``keys`` ``(B, Lk, Dk)`` and ``values`` ``(B, Lk, Dv)`` agree with ``B``.

    Example:
        >>> check_keys_values(torch.zeros(2, 3, 4), torch.zeros(2, 3, 5), 2)
    """
    if keys.dim() != 3 or values.dim() != 3 or keys.shape[:2] != values.shape[:2] or keys.shape[0] != batch:
        raise EmbregError(
            f"keys {tuple(keys.shape)} and values {tuple(values.shape)} must be (B, Lk, Dk) and (B, Lk, Dv) with "
            f"the query's batch size B={batch}"
        )

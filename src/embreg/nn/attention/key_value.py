"""Key-value attention over a window of the previous positions of the same sequence.

Reference: nlp-best-practices.txt, "Attention" (key-value attention, Daniluk et al., 2017, Sec. 2.2, eq. 4-6):
every hidden vector is split into a key and a value, ``[k_i; v_i] = h_i``; the keys of the ``L`` previous positions
give the attention distribution ``a_i = softmax(v_a^T tanh(W_1 [k_{i-L}; ...; k_{i-1}] + (W_2 k_i) 1^T))`` and the
values the context ``c_i = [v_{i-L}; ...; v_{i-1}] a_i^T``, used together with ``v_i`` for prediction.

Positions before the start of the sequence and padding positions get weight 0; the first position has no previous
position and gets a zero context.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import EmbregError
from embreg.nn.attention._masking import masked_softmax


def _windows(x: torch.Tensor, window: int) -> torch.Tensor:
    """``(B, T, D) -> (B, T, L, D)``: slot ``j`` of position ``i`` holds ``x[:, i - L + j]`` (zeros before 0)."""
    padded = F.pad(x, (0, 0, window, 0))
    return padded.unfold(1, window, 1)[:, : x.shape[1]].transpose(2, 3)


def key_value_attention(
    keys: torch.Tensor,
    values: torch.Tensor,
    w_window: torch.Tensor,
    w_current: torch.Tensor,
    v: torch.Tensor,
    window: int,
    *,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Windowed key-value attention of every position over its ``window`` predecessors.

    Args:
        keys: ``k`` ``(B, T, Dk)``; values: ``v`` ``(B, T, Dv)``.
        w_window: ``W_1`` ``(A, Dk)``, applied to the window's keys; w_current: ``W_2`` ``(A, Dk)``, to ``k_i``.
        v: ``v_a`` ``(A,)``.
        window: ``L >= 1``.
        mask: ``(B, T)``, True at real (non-padding) positions.

    Returns:
        ``(context (B, T, Dv), weights (B, T, L))``; slot ``j`` of ``weights[:, i]`` is the weight of position
        ``i - L + j``.

    Example:
        >>> k, v = torch.randn(2, 6, 3), torch.randn(2, 6, 4)
        >>> ctx, a = key_value_attention(k, v, torch.randn(5, 3), torch.randn(5, 3), torch.randn(5), 2)
        >>> tuple(ctx.shape), tuple(a.shape), a[:, 0].abs().sum().item(), a[:, 1, 0].abs().sum().item()
        ((2, 6, 4), (2, 6, 2), 0.0, 0.0)
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise EmbregError(f"window={window!r} must be an integer >= 1")
    if keys.dim() != 3 or values.dim() != 3 or keys.shape[:2] != values.shape[:2]:
        raise EmbregError(f"keys {tuple(keys.shape)} and values {tuple(values.shape)} must be (B, T, Dk), (B, T, Dv)")
    batch, length = keys.shape[:2]
    if mask is None:
        mask = torch.ones(batch, length, dtype=torch.bool, device=keys.device)
    elif tuple(mask.shape) != (batch, length):
        raise EmbregError(f"mask has shape {tuple(mask.shape)}; expected (B, T) = {(batch, length)}")
    past = _windows(keys @ w_window.T, window)  # (B, T, L, A)
    scores = torch.tanh(past + (keys @ w_current.T).unsqueeze(2)) @ v  # (B, T, L)
    valid = _windows(mask.bool().unsqueeze(-1), window).squeeze(-1)  # (B, T, L); False before the start
    weights = masked_softmax(scores, valid)
    context = (weights.unsqueeze(-2) @ _windows(values, window)).squeeze(-2)
    return context, weights


class KeyValueAttention(nn.Module):
    """Module form of :func:`key_value_attention` on hidden states ``h = [k; v]``.

    Args:
        key_dim: ``Dk``, the first ``Dk`` entries of each hidden vector; value_dim: ``Dv``, the rest.
        attn_dim: ``A``; window: ``L``.

    Shapes:
        ``hidden (B, T, Dk + Dv)``, ``mask (B, T)`` -> ``context (B, T, Dv)``, ``weights (B, T, L)``. The current
        values ``v_i``, which the document uses beside ``c_i`` for prediction, are ``split(hidden)[1]``.

    Example:
        >>> attn = KeyValueAttention(key_dim=3, value_dim=4, attn_dim=5, window=2)
        >>> h = torch.randn(2, 6, 7)
        >>> ctx, a = attn(h)
        >>> torch.cat([ctx, attn.split(h)[1]], -1).shape
        torch.Size([2, 6, 8])
    """

    def __init__(self, key_dim: int, value_dim: int, attn_dim: int, window: int) -> None:
        super().__init__()
        if min(key_dim, value_dim, attn_dim) < 1:
            raise EmbregError(f"key_dim={key_dim}, value_dim={value_dim}, attn_dim={attn_dim} must all be >= 1")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise EmbregError(f"window={window!r} must be an integer >= 1")
        self.key_dim, self.value_dim, self.window = key_dim, value_dim, window
        self.w_window = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_current = nn.Linear(key_dim, attn_dim, bias=False)
        self.v = nn.Parameter(torch.empty(attn_dim).uniform_(-(attn_dim**-0.5), attn_dim**-0.5))

    def split(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``[k; v] = h``: keys ``(B, T, Dk)`` and values ``(B, T, Dv)``."""
        if hidden.dim() != 3 or hidden.shape[-1] != self.key_dim + self.value_dim:
            raise EmbregError(
                f"hidden has shape {tuple(hidden.shape)}; expected (B, T, {self.key_dim + self.value_dim}) "
                f"(key_dim={self.key_dim} + value_dim={self.value_dim})"
            )
        return hidden[..., : self.key_dim], hidden[..., self.key_dim :]

    def forward(self, hidden: torch.Tensor, *, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.split(hidden)
        return key_value_attention(
            keys, values, self.w_window.weight, self.w_current.weight, self.v, self.window, mask=mask
        )

    def extra_repr(self) -> str:
        return f"key_dim={self.key_dim}, value_dim={self.value_dim}, window={self.window}"

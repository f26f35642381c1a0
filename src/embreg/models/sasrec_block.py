"""One self-attention block of SASRec, with its layer normalisation before (SASRec) or after (Transformer) each sublayer.

References:
    Kang & McAuley 2018, "Self-Attentive Sequential Recommendation", Sec. III-C/D and the authors' code: the
    ``pre`` block normalises the query and the feed-forward input, ``Q = LN(x); x = Q + MHA(Q, x, x);
    x = LN(x); x = x + FFN(x)``, and the model adds a final layer norm after the last block.
    Vaswani et al. 2017, "Attention Is All You Need", Sec. 3.1 and 5.4: the ``post`` block normalises each residual
    sum, ``x = LN(x + Dropout(MHA(x, x, x))); x = LN(x + Dropout(FFN(x)))``, with dropout on each sublayer's output
    (BERT, and RecBole's SASRec, use this block; no final layer norm is needed, the last sum is normalised).

Both blocks hold the same parameters (query, key/value and output projections, two layer norms, the two
feed-forward layers), so they differ only in where the norms, residuals and dropouts sit.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["NORM_PLACEMENTS", "SASRecBlock"]

NORM_PLACEMENTS = ("pre", "post")


class SASRecBlock(nn.Module):
    """Causal multi-head self-attention and a position-wise feed-forward network, pre-LN or post-LN.

    MHA is multi-head attention with learned query, key/value and output projections, computed with
    :func:`torch.nn.functional.scaled_dot_product_attention` under a boolean mask (True: may attend), with dropout on
    the attention weights. The feed-forward network is ``Linear -> ReLU -> Linear`` at every position, of width ``D``.

    * ``norm="pre"`` (SASRec): ``Q = LN_a(x); x = Q + MHA(Q, x, x); x = LN_f(x);
      x = x + Dropout(W_2 Dropout(ReLU(W_1 x)))``; the residual of the attention starts from the normalised
      query, as in the authors' code.
    * ``norm="post"`` (Transformer): ``x = LN_a(x + Dropout(MHA(x, x, x))); x = LN_f(x + Dropout(W_2 ReLU(W_1 x)))``.

    Args:
        hidden: width ``D`` of the states.
        heads: attention heads (divide ``D``).
        dropout: dropout probability.
        norm: ``"pre"`` or ``"post"``, where the layer norms sit.
        eps: the layer norms' epsilon.

    Shapes:
        ``x (B, L, D)``, ``mask (B, 1, L, L)`` bool -> ``(B, L, D)``.

    Example:
        >>> block = SASRecBlock(hidden=8, heads=2, dropout=0.0, norm="post")
        >>> mask = torch.ones(3, 3, dtype=torch.bool).tril().expand(1, 1, 3, 3)
        >>> block(torch.randn(1, 3, 8), mask, train=False).shape
        torch.Size([1, 3, 8])
    """

    def __init__(
        self, hidden: int, heads: int, dropout: float, norm: Literal["pre", "post"] = "pre", eps: float = 1e-8
    ) -> None:
        super().__init__()
        if norm not in NORM_PLACEMENTS:
            raise ValueError(f"norm={norm!r} must be one of {NORM_PLACEMENTS}")
        self.heads = heads
        self.dropout = dropout
        self.norm = norm
        self.attention_norm = nn.LayerNorm(hidden, eps=eps)
        self.query = nn.Linear(hidden, hidden)
        self.key_value = nn.Linear(hidden, 2 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ffn_norm = nn.LayerNorm(hidden, eps=eps)
        self.ffn_in = nn.Linear(hidden, hidden)
        self.ffn_out = nn.Linear(hidden, hidden)

    def attend(self, queries: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, train: bool) -> torch.Tensor:
        """``out(MHA(queries, x, x))`` ``(B, L, D)``: queries from ``queries``, keys and values from ``x``."""
        batch, length, hidden = x.shape
        heads, width = self.heads, hidden // self.heads
        q = self.query(queries).view(batch, length, heads, width).transpose(1, 2)
        k, v = self.key_value(x).view(batch, length, 2, heads, width).permute(2, 0, 3, 1, 4).unbind(0)
        attended = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if train else 0.0
        )  # (B, H, L, width)
        return self.out(attended.transpose(1, 2).reshape(batch, length, hidden))

    def forward(self, x: torch.Tensor, mask: torch.Tensor, train: bool) -> torch.Tensor:
        """``train``: apply dropout (the model passes its own mode, and False when scoring)."""
        p = self.dropout
        if self.norm == "post":
            x = self.attention_norm(x + F.dropout(self.attend(x, x, mask, train), p, train))
            return self.ffn_norm(x + F.dropout(self.ffn_out(F.relu(self.ffn_in(x))), p, train))
        q_in = self.attention_norm(x)
        x = self.ffn_norm(q_in + self.attend(q_in, x, mask, train))
        h = F.dropout(F.relu(self.ffn_in(x)), p, train)
        return x + F.dropout(self.ffn_out(h), p, train)

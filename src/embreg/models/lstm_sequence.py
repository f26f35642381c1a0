"""A single-layer LSTM over a whole sequence as one autograd node, differentiable twice.

Used by :class:`embreg.models.LSTMLanguageModel` with ``unroll=True`` for the analytic dropout regularisers of
dropout-explicit-implicit-regularization.txt (R_approx, eq. 4.4; xi_approx, eq. 4.6), which backpropagate through a
backward pass. PyTorch's fused CPU LSTM kernel is not differentiable twice as it stands (a create-graph backward
re-runs its forward with composite ops), and a Python loop of per-step ops leaves one weight-gradient product per
time step in every reverse pass. Here the forward pass runs without recording a graph, and the hand-written
backward is made of differentiable tensor ops:

* the recurrence runs backwards over time (``dh_{t-1} = dgates_t W_hh``, the cell-state recursion);
* the hidden-to-hidden weight gradient is **one** product over all time steps,
  ``dW_hh = sum_t dgates_t^T h_{t-1}`` as a ``(4H, B T) x (B T, H)`` matrix product;
* the states and gate activations it needs are outputs of the node (not hidden intermediates), so when autograd
  differentiates this backward again (``create_graph=True``) their dependence on the inputs is followed through the
  node's own backward: the second derivatives are exact (``gradgradcheck`` in the tests).

Gate order input, forget, cell, output, as in ``nn.LSTM``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["unrolled_lstm"]


class _LSTMSequence(torch.autograd.Function):
    """``(projected (B, T, 4H), h0 (B, H), c0 (B, H), w_hh (4H, H)) -> (hs, cs, acts)``.

    ``hs``, ``cs``: ``(B, T, H)`` hidden and cell states after each step; ``acts``: ``(B, T, 4H)`` the gate
    activations (sigmoid for input, forget and output, tanh for the cell candidate).
    """

    @staticmethod
    def forward(ctx, projected, h0, c0, w_hh):  # noqa: D102
        ctx.set_materialize_grads(False)
        hidden = w_hh.shape[1]
        w_t = w_hh.t()
        hs, cs, acts = [], [], []
        h, c = h0, c0
        for projected_t in projected.unbind(1):
            gates = torch.addmm(projected_t, h, w_t)
            act = torch.sigmoid(gates)
            torch.tanh(gates[:, 2 * hidden : 3 * hidden], out=act[:, 2 * hidden : 3 * hidden])
            i, f, g, o = act.split(hidden, dim=1)
            c = torch.addcmul(f * c, i, g)
            h = o * torch.tanh(c)
            hs.append(h)
            cs.append(c)
            acts.append(act)
        hs, cs, acts = torch.stack(hs, 1), torch.stack(cs, 1), torch.stack(acts, 1)
        ctx.save_for_backward(h0, c0, w_hh, hs, cs, acts)
        return hs, cs, acts

    @staticmethod
    def backward(ctx, grad_hs, grad_cs, grad_acts):  # noqa: D102
        h0, c0, w_hh, hs, cs, acts = ctx.saved_tensors
        hidden, steps = w_hh.shape[1], hs.shape[1]
        # one unbind per sequence tensor: its backward is one stack, not a zero tensor per step
        c_steps, act_steps = cs.unbind(1), acts.unbind(1)
        grad_h_steps = grad_hs.unbind(1) if grad_hs is not None else [None] * steps
        grad_c_steps = grad_cs.unbind(1) if grad_cs is not None else [None] * steps
        grad_act_steps = grad_acts.unbind(1) if grad_acts is not None else [None] * steps
        dh_next = dc_next = None
        dgates: list[torch.Tensor | None] = [None] * steps
        for t in range(steps - 1, -1, -1):
            i, f, g, o = act_steps[t].split(hidden, dim=1)
            c_prev = c_steps[t - 1] if t > 0 else c0
            tanh_c = torch.tanh(c_steps[t])
            dh = _add(grad_h_steps[t], dh_next)
            dc = _add(grad_c_steps[t], dc_next)
            do = None
            if dh is not None:
                dc = _add(dc, dh * o * (1 - tanh_c * tanh_c))
                do = dh * tanh_c
            di = df = dg = dc_next = None
            if dc is not None:
                di, df, dg, dc_next = dc * g, dc * c_prev, dc * i, dc * f
            if grad_act_steps[t] is not None:
                extra_i, extra_f, extra_g, extra_o = grad_act_steps[t].split(hidden, dim=1)
                di, df, dg, do = _add(di, extra_i), _add(df, extra_f), _add(dg, extra_g), _add(do, extra_o)
            parts = []
            for grad, act, is_tanh in ((di, i, False), (df, f, False), (dg, g, True), (do, o, False)):
                if grad is None:
                    parts.append(torch.zeros_like(act))
                else:
                    parts.append(grad * (1 - act * act) if is_tanh else grad * act * (1 - act))
            dgates[t] = torch.cat(parts, dim=1)
            dh_next = dgates[t].mm(w_hh)
        d_projected = torch.stack(dgates, 1)
        h_prev = torch.cat([h0.unsqueeze(1), hs[:, :-1]], dim=1)
        d_w_hh = d_projected.reshape(-1, 4 * hidden).t().mm(h_prev.reshape(-1, hidden))
        return d_projected, dh_next, dc_next, d_w_hh


def _add(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    """``a + b`` where ``None`` stands for a zero gradient."""
    if a is None:
        return b
    return a if b is None else a + b


def unrolled_lstm(
    x: torch.Tensor,
    state: tuple[torch.Tensor, torch.Tensor],
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    b_ih: torch.Tensor | None = None,
    b_hh: torch.Tensor | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """A single-layer, batch-first LSTM: ``nn.LSTM``'s function, differentiable twice with batched weight gradients.

    The input projection of all time steps is one matrix product (differentiated by autograd); the recurrence is
    one :class:`_LSTMSequence` node (see the module docstring).

    Args:
        x: ``(B, T, I)``; state: ``(h0, c0)``, each ``(1, B, H)``; weights and biases as in ``nn.LSTM`` (gate order
            input, forget, cell, output).

    Returns:
        ``(out (B, T, H), (h_T, c_T))`` with ``h_T, c_T`` of shape ``(1, B, H)``.

    Example:
        >>> lstm = torch.nn.LSTM(3, 4, batch_first=True)
        >>> x, state = torch.randn(2, 5, 3), (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
        >>> out, _ = unrolled_lstm(x, state, lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0)
        >>> torch.allclose(out, lstm(x, state)[0], atol=1e-6)
        True
    """
    bias = b_ih if b_hh is None else (b_hh if b_ih is None else b_ih + b_hh)
    projected = F.linear(x, w_ih, bias)  # (B, T, 4H)
    hs, cs, _ = _LSTMSequence.apply(projected, state[0][0], state[1][0], w_hh)
    return hs, (hs[:, -1].unsqueeze(0), cs[:, -1].unsqueeze(0))

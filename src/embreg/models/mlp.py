"""A plain multi-layer perceptron block shared by NCF and DLRM."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn


def mlp(
    in_dim: int,
    hidden: Sequence[int],
    *,
    negative_slope: float = 0.01,
    dropout: float = 0.0,
    last_activation: bool = True,
) -> nn.Sequential:
    """``Linear -> LeakyReLU (-> Dropout)`` per hidden width; weights Xavier-uniform, biases zero.

    Xavier-uniform follows mixed-dimension-embeddings.txt, Appendix H/I ("uniform Xavier initialization").

    Args:
        in_dim: input width.
        hidden: output width of each layer, e.g. ``(128, 128, 32)``.
        negative_slope: LeakyReLU slope (PyTorch's default 0.01, the paper's "default LeakyReLU").
        dropout: dropout after each activation.
        last_activation: apply the activation (and dropout) after the last layer too.

    Shapes:
        input (B, in_dim) -> (B, hidden[-1]) (or (B, in_dim) when ``hidden`` is empty).

    Example:
        >>> import torch
        >>> mlp(8, (16, 4))(torch.zeros(2, 8)).shape
        torch.Size([2, 4])
    """
    layers: list[nn.Module] = []
    width = in_dim
    for i, out in enumerate(hidden):
        linear = nn.Linear(width, out)
        nn.init.xavier_uniform_(linear.weight)
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if last_activation or i < len(hidden) - 1:
            layers.append(nn.LeakyReLU(negative_slope))
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
        width = out
    return nn.Sequential(*layers)

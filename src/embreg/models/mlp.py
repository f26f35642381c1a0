"""The multi-layer perceptron block shared by NCF and DLRM, plain or with layer connections."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from embreg.nn.connections import check_connection, connected_layers


def mlp(
    in_dim: int,
    hidden: Sequence[int],
    *,
    negative_slope: float = 0.01,
    dropout: float = 0.0,
    last_activation: bool = True,
    connections: str = "none",
) -> nn.Sequential:
    """``Linear -> LeakyReLU (-> Dropout)`` per hidden width; weights Xavier-uniform, biases zero.

    Xavier-uniform follows mixed-dimension-embeddings.txt, Appendix H/I ("uniform Xavier initialization").

    Args:
        in_dim: input width.
        hidden: output width of each layer, e.g. ``(128, 128, 32)``.
        negative_slope: LeakyReLU slope (PyTorch's default 0.01, the paper's "default LeakyReLU").
        dropout: dropout after each activation.
        last_activation: apply the activation (and dropout) after the last layer too.
        connections: ``"none"`` (the plain stack above), or ``"residual"``, ``"highway"``, ``"dense"``
            (nlp-best-practices.txt, "Layer connections"; :mod:`embreg.nn.connections`): each activated layer
            becomes one connected layer around its ``Linear -> LeakyReLU (-> Dropout)`` block; a last layer without
            activation (an output layer) stays a plain ``Linear`` reading the previous layer's output.

    Shapes:
        input (B, in_dim) -> (B, hidden[-1]) (or (B, in_dim) when ``hidden`` is empty).

    Raises:
        ValueError: ``connections`` is not ``"none"`` and no layer is activated, so there is nothing to connect.

    Example:
        >>> import torch
        >>> mlp(8, (16, 4))(torch.zeros(2, 8)).shape
        torch.Size([2, 4])
        >>> mlp(8, (16, 4), connections="highway")(torch.zeros(2, 8)).shape
        torch.Size([2, 4])
    """
    if check_connection(connections) != "none":
        return _connected_mlp(in_dim, list(hidden), negative_slope, dropout, last_activation, connections)
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


def _linear(in_dim: int, out_dim: int) -> nn.Linear:
    linear = nn.Linear(in_dim, out_dim)
    nn.init.xavier_uniform_(linear.weight)
    nn.init.zeros_(linear.bias)
    return linear


def _connected_mlp(
    in_dim: int, hidden: list[int], negative_slope: float, dropout: float, last_activation: bool, connections: str
) -> nn.Sequential:
    """:func:`mlp` with ``connections`` around each activated layer (see there)."""
    activated = hidden if last_activation else hidden[:-1]
    if not activated:
        raise ValueError(
            f"connections={connections!r} needs at least one hidden layer with an activation; the MLP {in_dim} -> "
            f"{hidden} has none"
        )

    def block(i: int, o: int) -> nn.Sequential:
        parts: list[nn.Module] = [_linear(i, o), nn.LeakyReLU(negative_slope)]
        if dropout > 0:
            parts.append(nn.Dropout(dropout))
        return nn.Sequential(*parts)

    layers: list[nn.Module] = list(connected_layers(connections, in_dim, activated, block))
    if not last_activation:
        layers.append(_linear(activated[-1], hidden[-1]))
    return nn.Sequential(*layers)

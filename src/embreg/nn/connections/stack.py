"""Build a stack of layers with one connection setting: the helper the models' MLPs use."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from embreg.nn.connections.base import ConnectedLayer, check_connection
from embreg.nn.connections.dense_layer import DenseLayer
from embreg.nn.connections.highway_layer import HighwayLayer
from embreg.nn.connections.residual_layer import ResidualLayer


def connected_layers(
    kind: str, in_dim: int, widths: list[int], make_block: Callable[[int, int], nn.Module]
) -> list[ConnectedLayer]:
    """One connected layer per width: ``make_block(in, out)`` wrapped by ``kind`` (not ``"none"``).

    Residual and highway layers read the previous layer's output; dense layer ``l`` reads ``[x^1; ...; x^l]``, so
    its block is built ``in_dim + widths[0] + ... + widths[l-1]`` wide (:mod:`embreg.nn.connections.dense_layer`).

    Args:
        kind: ``"residual"``, ``"highway"`` or ``"dense"``.
        in_dim: the stack's input width.
        widths: each layer's output width.
        make_block: ``(in, out) -> x -> g(W x + b)``.

    Example:
        >>> block = lambda i, o: nn.Sequential(nn.Linear(i, o), nn.ReLU())
        >>> [layer.in_dim for layer in connected_layers("dense", 4, [3, 2], block)]
        [4, 7]
    """
    check_connection(kind)
    if kind == "none":
        raise ValueError("connected_layers builds connections; build a plain stack for kind='none'")
    layers: list[ConnectedLayer] = []
    width = in_dim
    for index, out in enumerate(widths):
        block = make_block(width, out)
        if kind == "residual":
            layers.append(ResidualLayer(block, width, out))
            width = out
        elif kind == "highway":
            layers.append(HighwayLayer(block, width, out))
            width = out
        else:
            last = index == len(widths) - 1
            layers.append(DenseLayer(block, width, out, last=last))
            width = out if last else width + out
    return layers

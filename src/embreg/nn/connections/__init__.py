"""Layer connections (nlp-best-practices.txt, "Layer connections"): a functional core and a thin module each.

* :class:`HighwayLayer` (also named :data:`Highway`) / :func:`highway`: ``t * g(W x + b) + (1 - t) * x``,
  ``t = sigmoid(W_T x + b_T)``.
* :class:`ResidualLayer` / :func:`residual`: ``g(W x + b) + x``.
* :class:`DenseLayer` / :func:`dense_input`: layer ``l`` reads ``[x^1; ...; x^l]``.
* :func:`connected_layers`: a stack of such layers for one setting of :data:`CONNECTIONS`.

The MLPs of NCF and DLRM (:func:`embreg.models.mlp.mlp`) and the LSTM language model take these as their
``connections`` setting; ``"none"`` builds the plain model, unchanged.
"""

from embreg.nn.connections.base import CONNECTIONS, ConnectedLayer, check_connection, shortcut
from embreg.nn.connections.dense_layer import DenseLayer, dense_input
from embreg.nn.connections.highway_layer import GATE_BIAS, Highway, HighwayLayer, highway
from embreg.nn.connections.residual_layer import ResidualLayer, residual
from embreg.nn.connections.stack import connected_layers

__all__ = [
    "CONNECTIONS",
    "GATE_BIAS",
    "ConnectedLayer",
    "DenseLayer",
    "Highway",
    "HighwayLayer",
    "ResidualLayer",
    "check_connection",
    "connected_layers",
    "dense_input",
    "highway",
    "residual",
    "shortcut",
]

"""Building blocks: one concept per file, a pure function doing the work and a thin module calling it.

* :class:`LockedDropout` / :func:`locked_dropout`: one mask per sequence, shared across time.
* :class:`EmbeddingDropout` / :func:`embedding_dropout`: drop whole word types of an embedding.
* :class:`WeightDrop` / :func:`drop_connect`: DropConnect on named weights via ``torch.func.functional_call``.
* :class:`TiedOutput` / :func:`tied_logits`: softmax layer sharing the input embedding matrix.
* :func:`dropout_disabled`, :func:`dropout_active`: pause every dropout block (and torch dropout module) while in
  training mode.
* :class:`DropoutSite`: where dropout acts and how its mask is shared (used by ``embreg.regularizers.dropout``).
* :mod:`embreg.nn.attention`: additive (with coverage), multiplicative, scaled dot-product and key-value attention.
* :mod:`embreg.nn.connections`: highway, residual and dense layer connections.
"""

from embreg.nn.dropout_control import DropoutBlock, dropout_active, dropout_blocks, dropout_disabled
from embreg.nn.dropout_sites import STRUCTURES, DropoutSite
from embreg.nn.embedding_dropout import EmbeddingDropout, embedding_dropout
from embreg.nn.locked_dropout import LockedDropout, locked_dropout, locked_dropout_mask
from embreg.nn.tied_output import TiedOutput, tied_logits
from embreg.nn.weight_drop import WeightDrop, drop_connect

__all__ = [
    "STRUCTURES",
    "DropoutBlock",
    "DropoutSite",
    "EmbeddingDropout",
    "LockedDropout",
    "TiedOutput",
    "WeightDrop",
    "drop_connect",
    "dropout_active",
    "dropout_blocks",
    "dropout_disabled",
    "embedding_dropout",
    "locked_dropout",
    "locked_dropout_mask",
    "tied_logits",
]

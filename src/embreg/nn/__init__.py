"""Building blocks: one concept per file, a pure function doing the work and a thin module calling it.

Every block of the modules and subpackages below is importable from ``embreg.nn`` itself (each one's ``__all__``),
e.g. ``from embreg.nn import CRF, Highway, AdditiveAttention``.

Dropout (:mod:`~embreg.nn.locked_dropout`, :mod:`~embreg.nn.embedding_dropout`, :mod:`~embreg.nn.weight_drop`,
:mod:`~embreg.nn.packed_dropout`, :mod:`~embreg.nn.dropout_control`, :mod:`~embreg.nn.dropout_sites`):

* :class:`LockedDropout` / :func:`locked_dropout`: one mask per sequence, shared across time.
* :class:`EmbeddingDropout` / :func:`embedding_dropout`: drop whole word types of an embedding.
* :class:`WeightDrop` / :func:`drop_connect`: DropConnect on named weights via ``torch.func.functional_call``.
* :class:`PackedDropout` / :func:`packed_dropout`: inverted dropout with masks from packed 16-bit random words.
* :func:`dropout_disabled`, :func:`dropout_active`: pause every dropout block (:class:`DropoutBlock`, the base
  class) and torch dropout module while in training mode.
* :class:`DropoutSite`: where dropout acts and how its mask is shared (used by ``embreg.regularizers.dropout``).

Outputs and losses (:mod:`~embreg.nn.tied_output`, :mod:`~embreg.nn.label_smoothed_loss`):

* :class:`TiedOutput` / :func:`tied_logits`: softmax layer sharing the input embedding matrix.
* :func:`label_smoothed_cross_entropy`: label-smoothed cross-entropy with a hand-written backward.

Layers:

* :mod:`embreg.nn.attention`: additive (with coverage), multiplicative, scaled dot-product and key-value attention,
  and the self-attentive sentence embedding.
* :mod:`embreg.nn.connections`: highway (:class:`HighwayLayer`, also named :data:`Highway`), residual and dense
  layer connections.
* :mod:`embreg.nn.crf`: the linear-chain :class:`CRF` with BIO / IOBES constraints and Viterbi decoding.
* :mod:`embreg.nn.layer_stack`: :class:`LayerStack`, a model's layers as a list that can be run from any layer.

Decoding (:mod:`~embreg.nn.decoding`, :mod:`~embreg.nn.decoding_steps`): :func:`greedy_decode` and
:func:`beam_search` for any :class:`EncoderDecoder`, with GNMT's length and coverage penalties.

This package imports torch and its own modules only, never a higher layer of embreg.
"""

from embreg.nn.attention import (
    AdditiveAttention,
    KeyValueAttention,
    MultiplicativeAttention,
    ScaledDotProductAttention,
    SelfAttentiveEmbedding,
    additive_attention,
    additive_scores,
    attention_penalty,
    key_value_attention,
    masked_softmax,
    multiplicative_attention,
    scaled_dot_product_attention,
    self_attentive_weights,
    update_coverage,
)
from embreg.nn.connections import (
    CONNECTIONS,
    GATE_BIAS,
    ConnectedLayer,
    DenseLayer,
    Highway,
    HighwayLayer,
    ResidualLayer,
    check_connection,
    connected_layers,
    dense_input,
    highway,
    residual,
    shortcut,
)
from embreg.nn.crf import (
    CRF,
    SCHEMES,
    allowed_transitions,
    constrain,
    crf_log_likelihood,
    crf_log_partition,
    crf_path_score,
    invalid_transition,
    split_tag,
    viterbi_decode,
)
from embreg.nn.decoding import (
    Decoded,
    EncoderDecoder,
    IncrementalDecoder,
    beam_search,
    coverage_penalty,
    greedy_decode,
    length_penalty,
    sequence_score,
)
from embreg.nn.decoding_steps import CachedStepper, PrefixStepper, Stepper, is_incremental, make_stepper
from embreg.nn.dropout_control import (
    DropoutBlock,
    dropout_active,
    dropout_blocks,
    dropout_disabled,
    has_dropout,
    torch_dropouts,
)
from embreg.nn.dropout_sites import STRUCTURES, DropoutSite
from embreg.nn.embedding_dropout import EmbeddingDropout, embedding_dropout
from embreg.nn.label_smoothed_loss import label_smoothed_cross_entropy
from embreg.nn.layer_stack import LayerStack, SequentialSlice, SequentialStack, check_layer_index, linear_block_bounds
from embreg.nn.locked_dropout import LockedDropout, locked_dropout, locked_dropout_mask
from embreg.nn.packed_dropout import PackedDropout, packed_dropout, packed_keep_mask
from embreg.nn.tied_output import TiedOutput, embedding_matrix, tied_logits
from embreg.nn.weight_drop import WeightDrop, drop_connect

__all__ = [
    # attention
    "AdditiveAttention",
    "KeyValueAttention",
    "MultiplicativeAttention",
    "ScaledDotProductAttention",
    "SelfAttentiveEmbedding",
    "additive_attention",
    "additive_scores",
    "attention_penalty",
    "key_value_attention",
    "masked_softmax",
    "multiplicative_attention",
    "scaled_dot_product_attention",
    "self_attentive_weights",
    "update_coverage",
    # connections
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
    # crf
    "CRF",
    "SCHEMES",
    "allowed_transitions",
    "constrain",
    "crf_log_likelihood",
    "crf_log_partition",
    "crf_path_score",
    "invalid_transition",
    "split_tag",
    "viterbi_decode",
    # decoding, decoding_steps
    "Decoded",
    "EncoderDecoder",
    "IncrementalDecoder",
    "beam_search",
    "coverage_penalty",
    "greedy_decode",
    "length_penalty",
    "sequence_score",
    "CachedStepper",
    "PrefixStepper",
    "Stepper",
    "is_incremental",
    "make_stepper",
    # dropout
    "DropoutBlock",
    "dropout_active",
    "dropout_blocks",
    "dropout_disabled",
    "has_dropout",
    "torch_dropouts",
    "STRUCTURES",
    "DropoutSite",
    "EmbeddingDropout",
    "embedding_dropout",
    "LockedDropout",
    "locked_dropout",
    "locked_dropout_mask",
    "PackedDropout",
    "packed_dropout",
    "packed_keep_mask",
    "WeightDrop",
    "drop_connect",
    # outputs and losses
    "TiedOutput",
    "embedding_matrix",
    "tied_logits",
    "label_smoothed_cross_entropy",
    # layer stacks
    "LayerStack",
    "SequentialSlice",
    "SequentialStack",
    "check_layer_index",
    "linear_block_bounds",
]

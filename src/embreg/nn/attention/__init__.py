"""Attention blocks (nlp-best-practices.txt, "Attention"): a functional core and a thin module each.

* :class:`AdditiveAttention` / :func:`additive_attention`: Bahdanau's ``v^T tanh(W_1 h + W_2 s)``, optionally
  conditioned on a coverage vector (:func:`update_coverage`, "Modelling coverage").
* :class:`MultiplicativeAttention` / :func:`multiplicative_attention`: Luong's ``h^T W s`` ("general") or ``h^T s``
  ("dot").
* :class:`ScaledDotProductAttention` / :func:`scaled_dot_product_attention`: ``softmax(Q K^T / sqrt(d_k)) V``.
* :class:`KeyValueAttention` / :func:`key_value_attention`: Daniluk et al.'s keys and values over a window of ``L``
  previous positions.
* :class:`SelfAttentiveEmbedding` / :func:`self_attentive_weights`: Lin et al. (2017)'s structured self-attentive
  sentence embedding, and its Frobenius penalty :func:`attention_penalty` (:mod:`embreg.nn.attention.self_attentive`).

Every block takes a padding mask (True at real positions): padding never receives weight, and a row whose every
position is masked gets zero weights and a zero context, not NaN (:func:`masked_softmax`). Every call returns
``(context, weights)``.
"""

from embreg.nn.attention._masking import masked_softmax
from embreg.nn.attention.additive import AdditiveAttention, additive_attention, additive_scores, update_coverage
from embreg.nn.attention.key_value import KeyValueAttention, key_value_attention
from embreg.nn.attention.multiplicative import MultiplicativeAttention, multiplicative_attention
from embreg.nn.attention.scaled_dot_product import ScaledDotProductAttention, scaled_dot_product_attention
from embreg.nn.attention.self_attentive import SelfAttentiveEmbedding, attention_penalty, self_attentive_weights

__all__ = [
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
]

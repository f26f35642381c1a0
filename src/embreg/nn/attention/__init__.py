"""Attention blocks: one concept per file, a pure function doing the work and a thin module calling it.

* :mod:`embreg.nn.attention.self_attentive`: Lin et al. (2017)'s structured self-attentive sentence embedding
  (:class:`SelfAttentiveEmbedding`) and its Frobenius penalty (:func:`attention_penalty`).
"""

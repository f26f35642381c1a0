"""Linear-chain conditional random field with constrained transitions (BIO, IOBES) and Viterbi decoding.

* :mod:`~embreg.nn.crf.functional`: path scores, the forward algorithm (``log Z``), the log-likelihood and Viterbi,
  batched, one loop over time, any device.
* :mod:`~embreg.nn.crf.constraints`: which starts, transitions and ends BIO / IOBES allow.
* :class:`CRF`: the module (learned scores, constraints applied as ``-inf``).

Reference: nlp-best-practices.txt, "Sequence labelling".
"""

from embreg.nn.crf.constraints import SCHEMES, allowed_transitions, invalid_transition, split_tag
from embreg.nn.crf.functional import (
    constrain,
    crf_log_likelihood,
    crf_log_partition,
    crf_path_score,
    viterbi_decode,
)
from embreg.nn.crf.module import CRF

__all__ = [
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
]

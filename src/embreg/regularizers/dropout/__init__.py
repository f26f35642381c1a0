"""Dropout's explicit and implicit regularisers (dropout-explicit-implicit-regularization.txt).

* :class:`DropoutK`: the Dropout_k objective (Alg. 1).
* :class:`ExplicitDropoutRegularizer`: R_approx (eq. 4.4, Alg. 3) and the Sec. 5.2 ablations (identity Hessian,
  loss Jacobian R~_approx of eq. 5.1).
* :class:`ImplicitDropoutNoise`: the update noise xi_approx (eq. 4.6).
* :class:`TwoMaskDropoutNoise`: the exact two-mask noise of Sec. 3.1.
* :func:`algorithm2`, :func:`algorithm4`, :func:`two_mask_correction`: the paper's update rules.
* :mod:`~embreg.regularizers.dropout.functional`: the estimators as pure functions.
"""

from embreg.regularizers.dropout.algorithms import UpdateRule, algorithm2, algorithm4, two_mask_correction
from embreg.regularizers.dropout.explicit import FORMS, ExplicitDropoutRegularizer
from embreg.regularizers.dropout.functional import (
    dropout_variance,
    mask_gradients,
    r_approx,
    r_approx_identity,
    r_tilde_approx,
    sample_labels,
    xi_approx_surrogate,
)
from embreg.regularizers.dropout.implicit import ImplicitDropoutNoise, TwoMaskDropoutNoise, dropout_k_noise_scale
from embreg.regularizers.dropout.objective import DropoutK
from embreg.regularizers.dropout.sites import per_site, resolve_names

__all__ = [
    "FORMS",
    "DropoutK",
    "ExplicitDropoutRegularizer",
    "ImplicitDropoutNoise",
    "TwoMaskDropoutNoise",
    "UpdateRule",
    "algorithm2",
    "algorithm4",
    "dropout_k_noise_scale",
    "dropout_variance",
    "mask_gradients",
    "per_site",
    "r_approx",
    "r_approx_identity",
    "r_tilde_approx",
    "resolve_names",
    "sample_labels",
    "two_mask_correction",
    "xi_approx_surrogate",
]

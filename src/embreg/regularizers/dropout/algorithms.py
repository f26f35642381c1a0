"""The paper's update rules as lists of embreg parts (objective + regularisers) for the trainer.

* Alg. 1: Dropout_k alone (:class:`DropoutK`).
* Alg. 2: ``g = grad(l + lambda_1 R) + lambda_2 xi`` on the clean model: :func:`algorithm2`.
* Alg. 4: Dropout_k plus ``sqrt(q/(1-q)) sqrt(1 - 1/k) xi_approx``: :func:`algorithm4`.
* Sec. 3.1: Dropout_k plus the exact two-mask noise: :func:`two_mask_correction`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from embreg.regularizers.base import Objective, standard_objective
from embreg.regularizers.dropout.explicit import ExplicitDropoutRegularizer, HessianForm
from embreg.regularizers.dropout.functional import dropout_variance
from embreg.regularizers.dropout.implicit import ImplicitDropoutNoise, TwoMaskDropoutNoise, dropout_k_noise_scale
from embreg.regularizers.dropout.objective import DropoutK
from embreg.regularizers.dropout.sites import SiteStructure


@dataclass
class UpdateRule:
    """An objective and the regularisers that together make one of the paper's update rules.

    Attributes:
        objective: passed to ``Trainer(objective=...)``.
        regularizers: passed to ``Trainer(regularizers=...)``.
    """

    objective: Objective = standard_objective
    regularizers: list[Any] = field(default_factory=list)


def algorithm2(
    q: float,
    *,
    lambda1: float | None = None,
    lambda2: float | None = None,
    sites: Sequence[str] | None = None,
    form: HessianForm = "hessian",
    samples: int = 1,
    structure: SiteStructure = "element",
) -> UpdateRule:
    """Explicit plus implicit regulariser on a model without dropout (Alg. 2).

    Args:
        q: the dropout probability being replaced; sets the defaults ``lambda1 = q/(1-q)`` and
            ``lambda2 = sqrt(q/(1-q))`` (App. D.1: 2/3 and sqrt(2/3) at q = 0.4).
        lambda1, lambda2: override the coefficients (``lambda2 = 0`` gives R_approx alone, ``lambda1 = 0`` the noise
            alone).
        sites, form, samples, structure: see :class:`ExplicitDropoutRegularizer`.

    Example:
        >>> rule = algorithm2(0.4)
        >>> [type(r).__name__ for r in rule.regularizers]
        ['ExplicitDropoutRegularizer', 'ImplicitDropoutNoise']
    """
    lam1 = dropout_variance(q) if lambda1 is None else lambda1
    lam2 = math.sqrt(dropout_variance(q)) if lambda2 is None else lambda2
    regs: list[Any] = []
    if lam1 > 0:
        regs.append(ExplicitDropoutRegularizer(lam1, sites=sites, form=form, samples=samples, structure=structure))
    if lam2 > 0:
        regs.append(ImplicitDropoutNoise(lam2, sites=sites, structure=structure))
    return UpdateRule(standard_objective, regs)


def algorithm4(
    q: float, k: int, *, sites: Sequence[str] | None = None, structure: SiteStructure = "element"
) -> UpdateRule:
    """Dropout_k plus ``xi_approx`` scaled by ``sqrt(q/(1-q)) * sqrt(1 - 1/k)`` (Alg. 4, Fig. 4).

    Example:
        >>> rule = algorithm4(0.4, 8)
        >>> rule.objective.k, round(rule.regularizers[0].coefficients, 4)
        (8, 0.7638)
    """
    scale = math.sqrt(dropout_variance(q)) * dropout_k_noise_scale(k)
    regs = [ImplicitDropoutNoise(scale, sites=sites, structure=structure)] if scale > 0 else []
    return UpdateRule(DropoutK(k), regs)


def two_mask_correction(k: int) -> UpdateRule:
    """Dropout_k plus the exact two-mask noise of Sec. 3.1 (Fig. 2).

    Example:
        >>> type(two_mask_correction(4).regularizers[0]).__name__
        'TwoMaskDropoutNoise'
    """
    return UpdateRule(DropoutK(k), [TwoMaskDropoutNoise(k)])

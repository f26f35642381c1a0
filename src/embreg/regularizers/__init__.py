"""Regularisers: the hook protocol (:mod:`embreg.regularizers.base`) and one sub-package per family.

* :mod:`embreg.regularizers.dropout`: Dropout_k, R_approx, xi_approx (dropout-explicit-implicit-regularization.txt).
* fine-tuning stability (lnsr-noise-stability-bert.txt): :class:`LNSR`, :class:`LayerNoise` (FT+Noise), :class:`L2SP`,
  :class:`Mixout`, :class:`SMART`, :class:`R3F`, on a model's :mod:`~embreg.regularizers.layer_stack`.
* :mod:`embreg.regularizers.distillation`: knowledge distillation of teacher runs into one model, an objective
  (:class:`Distillation`; nlp-best-practices.txt, "Ensembling").
"""

from embreg.regularizers.base import Objective, Regularizer, StepContext, standard_objective
from embreg.regularizers.distillation import Distillation
from embreg.regularizers.dropout import (
    DropoutK,
    ExplicitDropoutRegularizer,
    ImplicitDropoutNoise,
    TwoMaskDropoutNoise,
    algorithm2,
    algorithm4,
    two_mask_correction,
)
from embreg.regularizers.l2sp import L2SP
from embreg.regularizers.layer_noise import LayerNoise
from embreg.regularizers.layer_stack import (
    DropoutReplay,
    HFEncoderStack,
    LayerStack,
    SequentialStack,
    layer_stack,
)
from embreg.regularizers.lnsr import LNSR
from embreg.regularizers.mixout import Mixout, MixoutLinear
from embreg.regularizers.r3f import R3F
from embreg.regularizers.smart import SMART

__all__ = [
    "Distillation",
    "DropoutReplay",
    "HFEncoderStack",
    "L2SP",
    "LNSR",
    "LayerNoise",
    "LayerStack",
    "Mixout",
    "MixoutLinear",
    "R3F",
    "SMART",
    "SequentialStack",
    "layer_stack",
    "DropoutK",
    "ExplicitDropoutRegularizer",
    "ImplicitDropoutNoise",
    "Objective",
    "Regularizer",
    "StepContext",
    "TwoMaskDropoutNoise",
    "algorithm2",
    "algorithm4",
    "standard_objective",
    "two_mask_correction",
]

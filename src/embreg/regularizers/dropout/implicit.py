"""Update noise replacing dropout's implicit regularisation: xi_approx (eq. 4.6) and the exact two-mask noise (Sec. 3.1).

Both are update transforms: they add mean-zero noise to the step's gradient and leave the objective's value alone.
They plug into the trainer through ``penalty``, returning a term whose value is exactly zero and whose gradient is the
noise, because the noise needs the step's autograd graph, which is gone by ``after_backward``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import torch

from embreg.errors import EmbregError
from embreg.nn.dropout_control import dropout_active
from embreg.registry import register
from embreg.regularizers.base import StepContext
from embreg.regularizers.dropout.clean_pass import clean_pass, clean_probs
from embreg.regularizers.dropout.functional import cross_entropy_logit_grad, dropout_variance, xi_approx_surrogate
from embreg.regularizers.dropout.objective import DropoutK
from embreg.regularizers.dropout.sites import (
    Coefficients,
    SiteStructure,
    model_sites,
    per_site,
    recipe_dropout_groups,
    resolve_names,
    site_coefficients,
)

if TYPE_CHECKING:
    from embreg.models.protocols import LossModel


def dropout_k_noise_scale(k: int) -> float:
    """``sqrt(1 - 1/k)``: the extra scale of the noise added to Dropout_k updates (Sec. 5.1, Alg. 4).

    Example:
        >>> dropout_k_noise_scale(1), round(dropout_k_noise_scale(4), 4)
        (0.0, 0.866)
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise EmbregError(f"k={k!r} must be an integer >= 1")
    return math.sqrt(1.0 - 1.0 / k)


class ImplicitDropoutNoise:
    """Adds ``xi_approx = grad_W sum_i lambda_2 J_{loss,i} (eta_i * h_i)`` to the gradient (eq. 4.6, footnote 6).

    ``eta_i`` has independent uniform ``{-1, +1}`` entries (one per mask coordinate of the site), drawn from torch's
    global RNG. ``J_{loss,i}`` is the Jacobian of the clean task loss (true labels). In eval mode nothing is added.
    Cost: one backward with ``create_graph`` plus its double backward (shared graph with the explicit regulariser).

    Args:
        coefficients: ``lambda_2``, one number or ``{site or group: number}``; App. D.1 uses ``sqrt(q / (1 - q))``, see
            :meth:`from_dropout`. The noise covariance scales with its square.
        sites: site names or groups (``None``: every site of the model).
        structure: ``"element"`` (one sign per entry) or ``"model"`` (the model's own mask sharing).

    Example:
        >>> from embreg.models import LSTMLanguageModel
        >>> model = LSTMLanguageModel.build(vocab_size=20, emb_dim=8, hidden_dim=8, layers=1)
        >>> batch = {"input": torch.randint(0, 20, (2, 5)), "target": torch.randint(0, 20, (2, 5))}
        >>> out = model(batch)
        >>> noise = ImplicitDropoutNoise.from_dropout(0.4)
        >>> noise.penalty(StepContext(model, batch, out, model.loss(batch, out))).item()
        0.0
    """

    def __init__(
        self, coefficients: Coefficients, *, sites: Sequence[str] | None = None, structure: SiteStructure = "element"
    ) -> None:
        if isinstance(coefficients, (int, float)) and coefficients < 0:
            raise EmbregError(f"coefficients={coefficients} must be >= 0")
        self.coefficients = coefficients
        self.sites = None if sites is None else list(sites)
        self.structure = structure

    @classmethod
    def from_dropout(cls, q: float, *, k: int | None = None, **kwargs) -> ImplicitDropoutNoise:
        """``lambda_2 = sqrt(q / (1 - q))`` (App. D.1), times ``sqrt(1 - 1/k)`` on top of Dropout_k (Alg. 4)."""
        scale = math.sqrt(dropout_variance(q))
        if k is not None:
            scale *= dropout_k_noise_scale(k)
        return cls(scale, **kwargs)

    def penalty(self, ctx: StepContext) -> torch.Tensor:
        if not ctx.model.training:
            return torch.zeros(())
        output, loss = clean_pass(ctx)
        sites = model_sites(ctx.model, ctx.batch, output, self.structure)
        names = resolve_names(sites, self.sites)
        coefficients = per_site(self.coefficients, names)
        if getattr(ctx.model, "loss_is_mean_cross_entropy", False) and "target" in ctx.batch:
            # d loss / dF = (softmax(F) - onehot(y)) / N, from the softmax R_approx shares (same value, fewer passes);
            # the surrogate is linear in d loss / dF, so the 1 / N goes into the coefficients (no N x C division)
            logits = output.predictions
            probs = clean_probs(ctx, logits)
            dlogits = cross_entropy_logit_grad(probs, ctx.batch["target"]).reshape(logits.shape)
            scaled = {name: value / probs.shape[0] for name, value in coefficients.items()}
            return xi_approx_surrogate(loss, sites, scaled, logits=logits, logits_grad=dlogits)
        return xi_approx_surrogate(loss, sites, coefficients)

    def __repr__(self) -> str:
        return (
            f"ImplicitDropoutNoise(coefficients={self.coefficients}, sites={self.sites}, structure={self.structure!r})"
        )


class TwoMaskDropoutNoise:
    """The exact correction of Sec. 3.1: adds ``sqrt((1 - 1/k) / 2) * (grad l(F(x, eta_1)) - grad l(F(x, eta_2)))``.

    ``eta_1, eta_2`` are two fresh draws of the model's own dropout. Added to Dropout_k updates it restores the
    gradient covariance of Dropout_1 (Fig. 2). Cost: two extra forward and backward passes. A no-op in eval mode, for
    ``k = 1`` and for a model without active dropout.

    Args:
        k: the k of the Dropout_k objective it accompanies, ``>= 1``.

    Example:
        >>> from embreg.models import LSTMLanguageModel
        >>> model = LSTMLanguageModel.build(vocab_size=20, emb_dim=8, hidden_dim=8, layers=1, q_output=0.4)
        >>> batch = {"input": torch.randint(0, 20, (2, 5)), "target": torch.randint(0, 20, (2, 5))}
        >>> TwoMaskDropoutNoise(4).penalty(StepContext(model, batch)).item()
        0.0
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self.scale = math.sqrt(0.5) * dropout_k_noise_scale(k)

    def penalty(self, ctx: StepContext) -> torch.Tensor:
        model = ctx.model
        if self.scale == 0.0 or not dropout_active(model):
            return torch.zeros(())
        first = cast("LossModel", model).loss(ctx.batch, model(ctx.batch))
        second = cast("LossModel", model).loss(ctx.batch, model(ctx.batch))
        noise = self.scale * (first - second)
        return noise - noise.detach()

    def __repr__(self) -> str:
        return f"TwoMaskDropoutNoise(k={self.k})"


@dataclass
class XiApproxConfig:
    """``regularizers: [{name: xi-approx}]``: the implicit update noise xi_approx.

    Its scale per site is ``lambda2`` (``null``: ``sqrt(q / (1 - q))`` of the site's dropout probability, App. D.1),
    times ``sqrt(1 - 1/k)`` when the objective is ``dropout-k`` (Alg. 4), else 1 (Alg. 2, with ``r-approx``).
    """

    lambda2: float | None = None
    structure: Literal["element", "model"] = "element"
    sites: list[str] | None = None

    def __post_init__(self) -> None:
        if self.lambda2 is not None and self.lambda2 < 0:
            raise EmbregError(f"lambda2={self.lambda2} must be >= 0 or null")


@register(
    "regularizer",
    "xi-approx",
    config=XiApproxConfig,
    requires=("dropout_sites",),
    differentiates_backward=True,
    summary="xi_approx: dropout's implicit update noise added to the gradient",
    reference="dropout-explicit-implicit-regularization.txt, eq. 4.6, Alg. 2 and 4",
)
def build_xi_approx(config: XiApproxConfig, context: Any) -> ImplicitDropoutNoise:
    noise = site_coefficients(
        recipe_dropout_groups(context), config.sites, config.lambda2, lambda q: math.sqrt(dropout_variance(q))
    )
    k = getattr(context.objective, "k", None)
    scale = dropout_k_noise_scale(k) if isinstance(context.objective, DropoutK) and k is not None else 1.0
    return ImplicitDropoutNoise({g: v * scale for g, v in noise.items()}, sites=list(noise), structure=config.structure)


@dataclass
class TwoMaskNoiseConfig:
    """``regularizers: [{name: two-mask-noise}]`` with ``objective: {name: dropout-k, k: ...}``: no arguments."""


@register(
    "regularizer",
    "two-mask-noise",
    config=TwoMaskNoiseConfig,
    requires=("dropout_sites",),
    objectives=("dropout-k",),
    summary="the exact two-mask noise that makes Dropout_k's update match Dropout_1's",
    reference="dropout-explicit-implicit-regularization.txt, Sec. 3.1",
)
def build_two_mask_noise(config: TwoMaskNoiseConfig, context: Any) -> TwoMaskDropoutNoise:
    if not isinstance(context.objective, DropoutK):
        raise EmbregError("two-mask-noise corrects Dropout_k: use it with objective {name: dropout-k, k: ...}")
    return TwoMaskDropoutNoise(context.objective.k)

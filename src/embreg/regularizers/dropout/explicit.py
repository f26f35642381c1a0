"""The explicit regulariser R_approx (eq. 4.4, Alg. 3) and its two ablations of Sec. 5.2, as trainer penalties."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import torch

from embreg.errors import EmbregError
from embreg.registry import register
from embreg.regularizers.base import StepContext
from embreg.regularizers.dropout.clean_pass import clean_pass, clean_probs
from embreg.regularizers.dropout.functional import dropout_variance, r_approx, r_approx_identity, r_tilde_approx
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
    from embreg.models.protocols import TargetModel

HessianForm = Literal["hessian", "identity", "loss_jacobian"]
FORMS: tuple[str, ...] = ("hessian", "identity", "loss_jacobian")


class ExplicitDropoutRegularizer:
    """``lambda_1 * R(F, x)`` added to the loss, with ``R`` one of three forms on the clean forward pass:

    * ``"hessian"``: ``R_approx`` of eq. 4.4, estimated by Alg. 3 (sampled labels, no gradient through sampling);
    * ``"identity"``: ``H_out`` replaced by ``I / C`` (Sec. 5.2, estimator of eq. C.4);
    * ``"loss_jacobian"``: ``R~_approx`` of eq. 5.1 (``H_out`` replaced by the true label's loss Jacobian squared).

    The model must implement ``dropout_sites(batch, output)``. When the step's forward pass had active dropout, a
    dropout-free forward pass is made for the regulariser (shared with :class:`ImplicitDropoutNoise`). In eval mode
    the penalty is zero.

    Cost per step (``hessian``, one sample): one backward with ``create_graph`` plus the double backward of the penalty
    (the paper reports about 3x a dropout step); ``identity`` needs two such reverse passes.

    Args:
        coefficients: ``lambda_1``, one number or ``{site or group: number}``. App. D.1 uses ``q / (1 - q)``; see
            :meth:`from_dropout`.
        sites: site names or groups to regularise (``None``: every site of the model).
        form: ``"hessian"``, ``"identity"`` or ``"loss_jacobian"``.
        samples: label samples per step for ``"hessian"``.
        structure: ``"element"`` (independent noise per entry, eq. 4.4 as written) or ``"model"`` (the sharing of the
            model's own dropout: locked across time, per word, per weight).

    Example:
        >>> from embreg.models import LSTMLanguageModel
        >>> model = LSTMLanguageModel.build(vocab_size=20, emb_dim=8, hidden_dim=8, layers=1)
        >>> batch = {"input": torch.randint(0, 20, (2, 5)), "target": torch.randint(0, 20, (2, 5))}
        >>> out = model(batch)
        >>> reg = ExplicitDropoutRegularizer.from_dropout(0.4, sites=["input", "output"])
        >>> ctx = StepContext(model, batch, out, model.loss(batch, out))
        >>> bool(reg.penalty(ctx) > 0)
        True
    """

    def __init__(
        self,
        coefficients: Coefficients,
        *,
        sites: Sequence[str] | None = None,
        form: HessianForm = "hessian",
        samples: int = 1,
        structure: SiteStructure = "element",
    ) -> None:
        if form not in FORMS:
            raise EmbregError(f"form={form!r} must be one of {FORMS}")
        if samples < 1:
            raise EmbregError(f"samples={samples} must be >= 1")
        if isinstance(coefficients, (int, float)) and coefficients < 0:
            raise EmbregError(f"coefficients={coefficients} must be >= 0")
        self.coefficients = coefficients
        self.sites = None if sites is None else list(sites)
        self.form = form
        self.samples = samples
        self.structure = structure

    @classmethod
    def from_dropout(cls, q: float, **kwargs) -> ExplicitDropoutRegularizer:
        """The coefficient that matches dropout probability ``q``: ``lambda_1 = q / (1 - q)`` (App. D.1)."""
        return cls(dropout_variance(q), **kwargs)

    def penalty(self, ctx: StepContext) -> torch.Tensor:
        if not ctx.model.training:
            return torch.zeros(())
        output, _ = clean_pass(ctx)
        sites = model_sites(ctx.model, ctx.batch, output, self.structure)
        names = resolve_names(sites, self.sites)
        coefficients = per_site(self.coefficients, names)
        logits = output.predictions
        if self.form == "hessian":
            return r_approx(logits, sites, coefficients, samples=self.samples, probs=clean_probs(ctx, logits))
        if self.form == "identity":
            return r_approx_identity(logits, sites, coefficients)
        if hasattr(ctx.model, "step_targets"):
            targets = cast("TargetModel", ctx.model).step_targets(ctx.batch)
        else:
            targets = ctx.batch["target"]
        return r_tilde_approx(logits, targets, sites, coefficients)

    def __repr__(self) -> str:
        return (
            f"ExplicitDropoutRegularizer(coefficients={self.coefficients}, sites={self.sites}, form={self.form!r},"
            f" samples={self.samples}, structure={self.structure!r})"
        )


@dataclass
class RApproxConfig:
    """``regularizers: [{name: r-approx, form: hessian}]``: the explicit regulariser in place of dropout.

    The model is then trained without dropout (the term replaces it). Attributes: ``form`` (``hessian``: R_approx,
    eq. 4.4; ``identity``; ``loss_jacobian``: R~_approx, eq. 5.1), ``lambda1`` (one coefficient for every site;
    ``null``: ``q / (1 - q)`` of each site's dropout probability in the model config, App. D.1), ``samples``
    (label samples), ``structure`` (``element`` or ``model``), ``sites`` (site groups; ``null``: those with q > 0).
    """

    form: Literal["hessian", "identity", "loss_jacobian"] = "hessian"
    lambda1: float | None = None
    samples: int = 1
    structure: Literal["element", "model"] = "element"
    sites: list[str] | None = None

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise EmbregError(f"samples={self.samples} must be >= 1")
        if self.lambda1 is not None and self.lambda1 < 0:
            raise EmbregError(f"lambda1={self.lambda1} must be >= 0 or null")


@register(
    "regularizer",
    "r-approx",
    config=RApproxConfig,
    requires=("dropout_sites",),
    differentiates_backward=True,
    replaces_dropout=True,
    summary="R_approx: dropout's explicit regulariser as a penalty, model trained without dropout (~3x)",
    reference="dropout-explicit-implicit-regularization.txt, eq. 4.4, eq. 5.1, Alg. 3",
)
def build_r_approx(config: RApproxConfig, context: Any) -> ExplicitDropoutRegularizer:
    coefficients = site_coefficients(recipe_dropout_groups(context), config.sites, config.lambda1, dropout_variance)
    return ExplicitDropoutRegularizer(
        coefficients, sites=list(coefficients), form=config.form, samples=config.samples, structure=config.structure
    )

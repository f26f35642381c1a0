"""The estimators of dropout-explicit-implicit-regularization.txt as pure functions of a clean forward pass.

Notation (paper Sec. 2 and 4): ``h_i`` a dropout site, ``F`` the network output (logits), ``H_out`` the Hessian of the
cross-entropy loss with respect to ``F``, ``J_{F,i} = dF/dh_i``, ``J_{loss,i} = d loss/dh_i``. A site's mask may be
shared among entries of ``h_i`` (see :class:`embreg.nn.DropoutSite`); every function below works in the mask's
coordinates ``m = 1 + eta``, where ``d loss/dm = reduce(d loss/dh * h)``. With the ``"element"`` structure this is
``J_{loss,i} diag(h_i)``, the quantity of eqs. 4.4-4.6.

Normalisation: ``logits`` has shape ``(..., C)``; its ``N = logits.numel() // C`` rows are the predictions, and the
task loss is their mean. Each function returns a per-prediction average, so it adds to the mean loss on the same
scale (the authors' code does the same).

Every function takes per-site coefficients (``lambda`` in Alg. 2, one per site) and skips sites whose coefficient is
zero; with all coefficients zero it returns an exact zero without touching the graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F

from embreg.errors import EmbregError
from embreg.nn._checks import check_probability
from embreg.nn.dropout_sites import DropoutSite


def dropout_variance(q: float) -> float:
    """``Var(eta) = q / (1 - q)`` for the dropout noise of Sec. 2 (``eta = -1`` w.p. ``q``, ``q/(1-q)`` else).

    This is the coefficient App. D.1 uses for the explicit regulariser (``lambda_1 = 2/3`` at ``q = 0.4``); its
    square root scales the Rademacher noise of footnote 6 (``lambda_2 = sqrt(2/3)``).

    Example:
        >>> round(dropout_variance(0.4), 4)
        0.6667
    """
    q = check_probability(q)
    return q / (1.0 - q)


def _active(sites: Mapping[str, DropoutSite], coefficients: Mapping[str, float]) -> list[tuple[str, float]]:
    unknown = sorted(set(coefficients) - set(sites))
    if unknown:
        raise EmbregError(f"coefficients name sites {unknown} that are not among the sites {sorted(sites)}")
    for name, value in coefficients.items():
        if value < 0:
            raise EmbregError(f"coefficient of site {name!r} is {value}; it must be >= 0")
    return [(name, float(value)) for name, value in coefficients.items() if value != 0.0]


def _rows(logits: torch.Tensor) -> torch.Tensor:
    if logits.dim() < 1 or logits.shape[-1] < 2:
        raise EmbregError(f"logits of shape {tuple(logits.shape)} need a class axis of size >= 2 last")
    return logits.reshape(-1, logits.shape[-1])


def sample_labels(logits: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Draws ``y_hat ~ softmax(logits)`` per row without gradient (Alg. 3, first line; App. C footnote 8).

    Args:
        logits: ``(..., C)``.

    Returns:
        LongTensor ``logits.shape[:-1]``.

    Example:
        >>> sample_labels(torch.tensor([[0.0, 50.0], [50.0, 0.0]])).tolist()
        [1, 0]
    """
    rows = _rows(logits.detach())
    probs = torch.softmax(rows.float(), dim=-1)
    return torch.multinomial(probs, 1, generator=generator).reshape(logits.shape[:-1])


def summed_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``sum_n loss_ce(F_n, y_n)`` over every row of ``logits`` ``(..., C)`` with labels ``(...)``."""
    return F.cross_entropy(_rows(logits), labels.reshape(-1), reduction="sum")


def mask_gradients(
    loss: torch.Tensor, sites: Sequence[DropoutSite], *, create_graph: bool = True
) -> list[torch.Tensor]:
    """``d loss / d m`` at ``m = 1`` for each site: ``reduce(d loss/dh * h)``, of each site's mask shape.

    Args:
        loss: a scalar depending on every site tensor.
        sites: the sites.
        create_graph: keep the graph so the result can be differentiated again (needed for training).
    """
    tensors = [site.tensor for site in sites]
    grads = torch.autograd.grad(loss, tensors, create_graph=create_graph, retain_graph=True, allow_unused=True)
    out = []
    for site, grad in zip(sites, grads):
        if grad is None:
            raise EmbregError("a dropout site does not influence the loss; was it computed in this forward pass?")
        out.append(site.reduce(grad * site.tensor))
    return out


def r_approx(
    logits: torch.Tensor,
    sites: Mapping[str, DropoutSite],
    coefficients: Mapping[str, float],
    *,
    samples: int = 1,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Unbiased sampled estimate of ``sum_i lambda_i <J_{F,i}^T H_out J_{F,i}, diag(h_i^2)>`` (eq. 4.4, Alg. 3).

    For each of ``samples`` draws ``y_hat ~ softmax(F)`` (no gradient through the sampling), the loss Jacobian for
    ``y_hat`` is taken with respect to every site, and ``sum (J_hat diag(h) )^2`` is averaged. Because
    ``E[D l_{y_hat}^T D l_{y_hat}] = H_out`` (Claim E.1) this is unbiased for eq. 4.4; cross terms between predictions
    vanish in expectation since each ``D l_{y_hat}`` has mean zero, so masks shared across time or words are handled
    by the same formula.

    Cost: one extra backward with ``create_graph`` per sample, then the double backward of the result.

    Args:
        logits: ``(..., C)`` clean-forward logits ``F(x)`` (no dropout), in the graph of ``sites``.
        sites: ``{name: DropoutSite}`` from the same forward pass.
        coefficients: ``{name: lambda_i}``; App. D.1 uses ``q / (1 - q)`` for every site.
        samples: label draws averaged (Table 3's "R_approx, 8 samples").
        generator: optional generator for the label draws (default: torch's global one).

    Returns:
        A scalar, averaged over the ``N`` predictions.

    Example:
        >>> h = torch.randn(4, 3, requires_grad=True)
        >>> logits = h @ torch.randn(3, 5)
        >>> r = r_approx(logits, {"h": DropoutSite(h)}, {"h": 2 / 3})
        >>> r.ndim, bool(r >= 0)
        (0, True)
    """
    if samples < 1:
        raise EmbregError(f"samples={samples} must be >= 1")
    active = _active(sites, coefficients)
    if not active:
        return logits.new_zeros(())
    chosen = [sites[name] for name, _ in active]
    n = _rows(logits).shape[0]
    total = logits.new_zeros(())
    for _ in range(samples):
        loss = summed_cross_entropy(logits, sample_labels(logits, generator=generator))
        for (_, coef), grad in zip(active, mask_gradients(loss, chosen)):
            total = total + coef * grad.pow(2).sum()
    return total / (samples * n)


def r_tilde_approx(
    logits: torch.Tensor,
    labels: torch.Tensor,
    sites: Mapping[str, DropoutSite],
    coefficients: Mapping[str, float],
) -> torch.Tensor:
    """``R~_approx = sum_i lambda_i J_{loss,i} diag(h_i^2) J_{loss,i}^T`` with the true labels (eq. 5.1, Sec. 5.2).

    The loss-Jacobian ablation: ``H_out`` replaced by ``D l_y^T D l_y`` for the observed label ``y``.

    Args:
        logits: ``(..., C)`` clean logits; labels: ``(...)`` true classes.
        sites, coefficients: as in :func:`r_approx`.

    Example:
        >>> h = torch.randn(4, 3, requires_grad=True)
        >>> logits = h @ torch.randn(3, 5)
        >>> r_tilde_approx(logits, torch.tensor([0, 1, 2, 3]), {"h": DropoutSite(h)}, {"h": 0.0}).item()
        0.0
    """
    active = _active(sites, coefficients)
    if not active:
        return logits.new_zeros(())
    chosen = [sites[name] for name, _ in active]
    loss = summed_cross_entropy(logits, labels)
    total = logits.new_zeros(())
    for (_, coef), grad in zip(active, mask_gradients(loss, chosen)):
        total = total + coef * grad.pow(2).sum()
    return total / _rows(logits).shape[0]


def rademacher(shape: Sequence[int], *, like: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Independent uniform ``{-1, +1}`` entries of ``shape`` with ``like``'s dtype and device (footnote 6)."""
    bits = torch.randint(0, 2, tuple(shape), generator=generator, device=like.device)
    return (bits * 2 - 1).to(like.dtype)


def r_approx_identity(
    logits: torch.Tensor,
    sites: Mapping[str, DropoutSite],
    coefficients: Mapping[str, float],
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Identity-Hessian ablation (Sec. 5.2, App. C.3): ``sum_i lambda_i <J_{F,i}^T J_{F,i}, diag(h_i^2)> / C``.

    Estimated with eq. C.4: for Rademacher ``eta_i``, ``E ||J_{F,i} (eta_i * h_i)||^2 = <J^T J, diag(h^2)>``. All
    sites share one Jacobian-vector product with the tangent ``sum_i sqrt(lambda_i) eta_i * h_i`` (unbiased, as the
    ``eta_i`` are independent and zero-mean), computed with two reverse passes (the double-vjp trick). The identity is
    scaled by ``1 / C`` so that it has the trace of a uniform prediction's ``diag(p)``, as in the authors' code.

    Example:
        >>> h = torch.randn(4, 3, requires_grad=True)
        >>> logits = h @ torch.ones(3, 5)
        >>> bool(r_approx_identity(logits, {"h": DropoutSite(h)}, {"h": 1.0}) > 0)
        True
    """
    active = _active(sites, coefficients)
    if not active:
        return logits.new_zeros(())
    chosen = [sites[name] for name, _ in active]
    probe = torch.zeros_like(logits, requires_grad=True)
    vjps = torch.autograd.grad(logits, [s.tensor for s in chosen], grad_outputs=probe, create_graph=True,
                               retain_graph=True)
    tangents = [
        (coef ** 0.5) * site.expand(rademacher(site.mask_shape(), like=site.tensor, generator=generator)) * site.tensor
        for (_, coef), site in zip(active, chosen)
    ]
    (jvp,) = torch.autograd.grad(vjps, probe, grad_outputs=tangents, create_graph=True, retain_graph=True)
    rows = _rows(logits)
    return jvp.pow(2).sum() / (rows.shape[0] * rows.shape[1])


def xi_approx_surrogate(
    loss: torch.Tensor,
    sites: Mapping[str, DropoutSite],
    coefficients: Mapping[str, float],
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """A scalar whose gradient is the update noise ``xi_approx`` of eq. 4.6, and whose value is exactly zero.

    ``xi_approx = grad_W sum_i lambda_i J_{loss,i} (eta_i * h_i)`` with Rademacher ``eta_i`` (footnote 6). The returned
    ``s - s.detach()`` adds ``xi_approx`` to the gradients of whatever it is added to, without changing the value of
    the objective, so it works as an update transform inside any loop that calls ``backward`` once.

    Args:
        loss: the clean task loss (mean over predictions) in the graph of ``sites``.
        sites: ``{name: DropoutSite}``.
        coefficients: ``{name: lambda_2 scale}``; App. D.1 uses ``sqrt(q / (1 - q))`` (and Alg. 4 multiplies it by
            ``sqrt(1 - 1/k)``). The noise covariance scales with the square of the coefficient.
        generator: optional generator for ``eta``.

    Example:
        >>> h = torch.randn(4, 3, requires_grad=True)
        >>> loss = (h @ torch.randn(3, 1)).pow(2).mean()
        >>> s = xi_approx_surrogate(loss, {"h": DropoutSite(h)}, {"h": 0.8})
        >>> s.item()
        0.0
    """
    active = _active(sites, coefficients)
    if not active:
        return loss.new_zeros(())
    chosen = [sites[name] for name, _ in active]
    s = loss.new_zeros(())
    for (_, coef), site, grad in zip(active, chosen, mask_gradients(loss, chosen)):
        eta = rademacher(grad.shape, like=grad, generator=generator)
        s = s + coef * (grad * eta).sum()
    return s - s.detach()

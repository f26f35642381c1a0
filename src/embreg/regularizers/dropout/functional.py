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

Precision: the gradients may be float16 or bfloat16 (autocast), but every sum over a batch is taken in at least
float32 (:func:`_squared_sum`). A float16 sum of squares overflows (65504) once a batch of ``N x C`` or ``N x H``
entries is large, as a language model's batch of a few thousand tokens over a 10k vocabulary is: summed in float16,
the identity form and R_approx are ``inf`` there (tests/regularizers/test_dropout_precision.py builds such a batch).
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


def _at_least_float32(dtype: torch.dtype) -> torch.dtype:
    """float32 for float16 and bfloat16, the dtype itself for float32 and float64."""
    return torch.promote_types(dtype, torch.float32)


def _squared_sum(values: torch.Tensor) -> torch.Tensor:
    """``sum(values^2)`` in at least float32 (differentiable)."""
    return values.to(_at_least_float32(values.dtype)).pow(2).sum()


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
    return _categorical(torch.softmax(rows.float(), dim=-1), generator).reshape(logits.shape[:-1])


def _categorical(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One draw per row of ``probs`` ``(N, C)`` by inversion of the cumulative distribution, in two stages.

    With ``u ~ U[0, total)``, class ``c`` is returned when ``cdf[c-1] <= u < cdf[c]``, which has probability
    ``p_c / total``: exact sampling from the categorical distribution up to floating-point rounding (block sums in
    the input's precision, cumulative sums in float64). To avoid a cumulative
    sum over all ``N x C`` entries, the classes are cut into about ``sqrt(C)`` blocks: ``u`` first picks a block by
    the cumulative block sums, then a class inside it by the cumulative sum of that block alone (the same inversion,
    since ``cdf[c] = cdf_blocks[k-1] + cdf_within_block[c]``). It replaces ``torch.multinomial``, which on CPU draws
    one exponential variate per class and row and was the single most expensive operation of an R_approx step.
    """
    probs = probs.detach()
    n, c = probs.shape
    root = max(1, int(round(c**0.5)))
    width = next((w for w in range(root, 2 * root + 1) if c % w == 0), root)  # a divisor of C avoids padding
    blocks = -(-c // width)
    if blocks * width != c:
        probs = torch.cat([probs, probs.new_zeros(n, blocks * width - c)], dim=1)
    grid = probs.reshape(n, blocks, width)
    block_cdf = grid.sum(dim=-1).to(torch.float64).cumsum(dim=-1)  # (N, blocks)
    u = torch.rand(n, 1, generator=generator, dtype=torch.float64, device=probs.device) * block_cdf[:, -1:]
    block = torch.searchsorted(block_cdf, u, right=True).clamp_(max=blocks - 1)  # (N, 1)
    before = torch.where(block > 0, block_cdf.gather(1, (block - 1).clamp(min=0)), torch.zeros_like(u))
    inner = grid.gather(1, block.unsqueeze(-1).expand(n, 1, width)).squeeze(1).to(torch.float64).cumsum(dim=-1)
    # rounding can leave u - before at or above the block's own total: take the block's last class of nonzero mass
    last = (inner < inner[:, -1:]).sum(dim=-1, keepdim=True)
    inside = torch.minimum(torch.searchsorted(inner, u - before, right=True), last)
    return (block * width + inside).reshape(-1).clamp_(max=c - 1)  # never a padding column


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
    return _reduced_site_gradients(loss, None, sites, create_graph)


def logit_gradients(
    logits: torch.Tensor, logits_grad: torch.Tensor, sites: Sequence[DropoutSite], *, create_graph: bool = True
) -> list[torch.Tensor]:
    """``reduce(J_{F,i}^T g * h_i)`` for each site: :func:`mask_gradients` of a loss whose gradient at ``F`` is ``g``.

    ``logits_grad`` (shaped like ``logits``) may itself depend on the graph (e.g. ``softmax(F) - onehot(y)``), so the
    result is differentiated through both the network and ``g``. This is one reverse pass from the logits, the same
    pass :func:`mask_gradients` makes after the loss's own backward, without the cross-entropy's backward graph
    (whose double backward is several passes over the ``N x C`` logits).
    """
    return _reduced_site_gradients(logits, logits_grad, sites, create_graph)


def _reduced_site_gradients(
    output: torch.Tensor, grad_output: torch.Tensor | None, sites: Sequence[DropoutSite], create_graph: bool
) -> list[torch.Tensor]:
    """``reduce(d<output, grad_output>/dh_i * h_i)`` per site, keeping the graph for a second differentiation."""
    grads = torch.autograd.grad(
        output,
        [site.tensor for site in sites],
        grad_outputs=grad_output,
        create_graph=create_graph,
        retain_graph=True,
        allow_unused=True,
    )
    out = []
    for site, grad in zip(sites, grads):
        if grad is None:
            raise EmbregError("a dropout site does not influence the loss; was it computed in this forward pass?")
        out.append(site.reduce(grad * site.tensor))
    return out


def cross_entropy_logit_grad(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``softmax(F) - onehot(y)`` row by row: the gradient of ``sum_n loss_ce(F_n, y_n)`` at ``F``.

    Args:
        probs: ``(N, C)`` ``softmax(F)``, in the graph (its derivative with respect to ``F`` is ``H_out``).
        labels: ``N`` classes, any shape (no gradient).
    """
    index = labels.reshape(-1, 1)
    if index.shape[0] != probs.shape[0]:
        raise EmbregError(f"{index.shape[0]} labels for {probs.shape[0]} rows of probabilities")
    return probs.scatter_add(-1, index, -probs.new_ones(index.shape))


def r_approx(
    logits: torch.Tensor,
    sites: Mapping[str, DropoutSite],
    coefficients: Mapping[str, float],
    *,
    samples: int = 1,
    generator: torch.Generator | None = None,
    probs: torch.Tensor | None = None,
) -> torch.Tensor:
    """Unbiased sampled estimate of ``sum_i lambda_i <J_{F,i}^T H_out J_{F,i}, diag(h_i^2)>`` (eq. 4.4, Alg. 3).

    For each of ``samples`` draws ``y_hat ~ softmax(F)`` (no gradient through the sampling), the loss Jacobian for
    ``y_hat`` is taken with respect to every site, and ``sum (J_hat diag(h) )^2`` is averaged. Because
    ``E[D l_{y_hat}^T D l_{y_hat}] = H_out`` (Claim E.1) this is unbiased for eq. 4.4; cross terms between predictions
    vanish in expectation since each ``D l_{y_hat}`` has mean zero, so masks shared across time or words are handled
    by the same formula.

    Cost: one extra backward with ``create_graph`` per sample, then the double backward of the result. The loss
    gradient ``softmax(F) - onehot(y_hat)`` is formed directly from one shared softmax (the same function as the
    cross-entropy's gradient, so the same derivatives) instead of differentiating a cross-entropy twice, and labels
    are drawn by inverting the cumulative distribution; both keep the estimator and remove most passes over the
    ``N x C`` logits.

    Args:
        logits: ``(..., C)`` clean-forward logits ``F(x)`` (no dropout), in the graph of ``sites``.
        sites: ``{name: DropoutSite}`` from the same forward pass.
        coefficients: ``{name: lambda_i}``; App. D.1 uses ``q / (1 - q)`` for every site.
        samples: label draws averaged (Table 3's "R_approx, 8 samples").
        generator: optional generator for the label draws (default: torch's global one).
        probs: ``softmax(logits)`` as ``(N, C)`` rows, in the graph, when the caller has it already (it is shared with
            :func:`xi_approx_surrogate` in Alg. 2); computed here otherwise.

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
    rows = _rows(logits)
    n = rows.shape[0]
    if probs is None:
        probs = torch.softmax(rows, dim=-1)  # shared by the label draws and every sample's loss gradient
    total = logits.new_zeros((), dtype=_at_least_float32(logits.dtype))
    for _ in range(samples):
        labels = _categorical(probs, generator)  # no gradient through the sampling (Alg. 3)
        dlogits = cross_entropy_logit_grad(probs, labels).reshape(logits.shape)  # D l_{y_hat}, graph through F
        for (_, coef), grad in zip(active, logit_gradients(logits, dlogits, chosen)):
            total = total + coef * _squared_sum(grad)
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
    rows = _rows(logits)
    dlogits = cross_entropy_logit_grad(torch.softmax(rows, dim=-1), labels).reshape(logits.shape)  # D l_y
    total = logits.new_zeros((), dtype=_at_least_float32(logits.dtype))
    for (_, coef), grad in zip(active, logit_gradients(logits, dlogits, chosen)):
        total = total + coef * _squared_sum(grad)
    return total / rows.shape[0]


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
    vjps = torch.autograd.grad(
        logits, [s.tensor for s in chosen], grad_outputs=probe, create_graph=True, retain_graph=True
    )
    tangents = [
        (coef**0.5) * site.expand(rademacher(site.mask_shape(), like=site.tensor, generator=generator)) * site.tensor
        for (_, coef), site in zip(active, chosen)
    ]
    (jvp,) = torch.autograd.grad(vjps, probe, grad_outputs=tangents, create_graph=True, retain_graph=True)
    rows = _rows(logits)
    return _squared_sum(jvp) / (rows.shape[0] * rows.shape[1])


def xi_approx_surrogate(
    loss: torch.Tensor,
    sites: Mapping[str, DropoutSite],
    coefficients: Mapping[str, float],
    *,
    generator: torch.Generator | None = None,
    logits: torch.Tensor | None = None,
    logits_grad: torch.Tensor | None = None,
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
        logits, logits_grad: optionally the network output ``F`` and ``d loss / dF`` as a tensor in the graph (for
            the mean cross-entropy, ``(softmax(F) - onehot(y)) / N``); the site gradients are then one reverse pass
            from ``F`` (:func:`logit_gradients`) instead of a pass through the loss's own backward graph. Same value,
            same derivatives, fewer passes over the ``N x C`` logits.

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
    if logits is None or logits_grad is None:
        if logits is not None or logits_grad is not None:
            raise EmbregError("give both logits and logits_grad (d loss / d logits), or neither")
        grads = mask_gradients(loss, chosen)
    else:
        if tuple(logits_grad.shape) != tuple(logits.shape):
            raise EmbregError(
                f"logits_grad of shape {tuple(logits_grad.shape)} must have the logits' shape {tuple(logits.shape)}"
            )
        grads = logit_gradients(logits, logits_grad, chosen)
    s = loss.new_zeros((), dtype=_at_least_float32(loss.dtype))
    for (_, coef), _site, grad in zip(active, chosen, grads):
        eta = rademacher(grad.shape, like=grad, generator=generator)
        s = s + coef * (grad * eta).to(s.dtype).sum()  # a float16 sum could overflow, and inf - inf is NaN
    return s - s.detach()

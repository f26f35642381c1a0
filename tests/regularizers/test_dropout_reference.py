"""Reference checks of the estimators against full Jacobians and Hessians on a tiny float64 network."""

import pytest
import torch
from torch.autograd.functional import jacobian

from embreg.nn import DropoutSite
from embreg.regularizers.dropout import r_approx, r_approx_identity, r_tilde_approx, xi_approx_surrogate
from tests.helpers import dropout_tiny as _tiny


def _exact_r(p, x, lam, weight=None):
    """sum_i lam_i <J_i^T W J_i, diag(h_i^2)> averaged over examples, W = H_out (or ``weight``)."""
    h1, h2, logits = _tiny.forward(p, x)
    total = 0.0
    for b in range(x.shape[0]):
        w = _tiny.loss_hessian(logits[b]) if weight is None else weight
        j1 = jacobian(lambda v: _tiny.after_h1(p, v), h1[b].detach())
        j2 = jacobian(lambda v: _tiny.head(p, v), h2[b].detach())
        total += lam["h1"] * (torch.diagonal(j1.T @ w @ j1) * h1[b] ** 2).sum()
        total += lam["h2"] * (torch.diagonal(j2.T @ w @ j2) * h2[b] ** 2).sum()
    return total.item() / x.shape[0]


def _sites(h1, h2):
    return {"h1": DropoutSite(h1), "h2": DropoutSite(h2)}


def _assert_mc_mean(draws, exact, sigmas=4.0):
    """The Monte Carlo mean lies within ``sigmas`` standard errors of ``exact`` (and the error is small)."""
    values = torch.tensor(draws, dtype=torch.float64)
    mean, stderr = values.mean().item(), values.std().item() / len(draws) ** 0.5
    assert abs(mean - exact) < sigmas * stderr, (mean, exact, stderr)
    assert stderr < 0.05 * exact


LAM = {"h1": 0.7, "h2": 1.3}


def _replicated(p, x, copies):
    """The forward pass on ``copies`` stacked copies of ``x``: each row's estimate is an independent draw."""
    return _tiny.forward(p, x.repeat(copies, 1))


def _chunk_means(estimate, chunks=40):
    """``chunks`` values, each the mean of many independent single-sample estimates (one call each)."""
    return [estimate().item() for _ in range(chunks)]


def test_sampled_r_approx_matches_exact_jacobian_hessian_form():
    p = _tiny.params()
    x, _ = _tiny.inputs()
    h1, h2, logits = _replicated(p, x, 50)
    torch.manual_seed(0)
    draws = _chunk_means(lambda: r_approx(logits, _sites(h1, h2), LAM))
    exact = _exact_r(p, x, LAM)
    assert exact > 0.01
    _assert_mc_mean(draws, exact)


def test_locked_sites_match_the_exact_form_with_a_shared_mask():
    """With a mask shared across time, J is the derivative with respect to the mask (sum over shared entries)."""
    g = torch.Generator().manual_seed(3)
    w1 = torch.randn(5, 4, generator=g, dtype=torch.float64).requires_grad_()
    w3 = torch.randn(_tiny.C, 5, generator=g, dtype=torch.float64) * 1.5
    x = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)

    def rest(h):  # (T, 5) -> (T, C): mixes time steps, so a mask shared in time couples them
        return torch.tanh(torch.cumsum(h, 0)) @ w3.T

    h = torch.tanh(x @ w1.T)
    logits = torch.stack([rest(h[b]) for b in range(2)])
    copies = 50
    h_rep = torch.tanh(x.repeat(copies, 1, 1) @ w1.T)  # independent masks and labels per copy
    logits_rep = torch.stack([rest(h_rep[b]) for b in range(2 * copies)])
    exact = 0.0
    for b in range(2):
        hb = h[b].detach()
        jm = jacobian(lambda m, hb=hb: rest(m * hb).reshape(-1), torch.ones(5, dtype=torch.float64))  # (T*C, 5)
        hess = torch.block_diag(*[_tiny.loss_hessian(row) for row in logits[b].detach()])
        exact += float(torch.trace(jm.T @ hess @ jm))
    exact /= 2 * 3
    torch.manual_seed(1)
    draws = _chunk_means(lambda: r_approx(logits_rep, {"h": DropoutSite(h_rep, "locked")}, {"h": 1.0}))
    _assert_mc_mean(draws, exact)


def test_identity_ablation_matches_exact_form():
    p = _tiny.params()
    x, _ = _tiny.inputs()
    h1, h2, logits = _replicated(p, x, 50)
    torch.manual_seed(2)
    draws = _chunk_means(lambda: r_approx_identity(logits, _sites(h1, h2), LAM))
    exact = _exact_r(p, x, LAM, weight=torch.eye(_tiny.C, dtype=torch.float64)) / _tiny.C
    _assert_mc_mean(draws, exact)


def test_loss_jacobian_ablation_is_exact():
    p = _tiny.params()
    x, y = _tiny.inputs()
    h1, h2, logits = _tiny.forward(p, x)
    got = r_tilde_approx(logits, y, _sites(h1, h2), LAM).item()
    exact = 0.0
    for b in range(x.shape[0]):

        def loss1(v, b=b):
            return torch.nn.functional.cross_entropy(_tiny.after_h1(p, v)[None], y[b : b + 1])

        def loss2(v, b=b):
            return torch.nn.functional.cross_entropy(_tiny.head(p, v)[None], y[b : b + 1])

        exact += LAM["h1"] * ((jacobian(loss1, h1[b].detach()) * h1[b].detach()) ** 2).sum().item()
        exact += LAM["h2"] * ((jacobian(loss2, h2[b].detach()) * h2[b].detach()) ** 2).sum().item()
    assert got == pytest.approx(exact / x.shape[0], rel=1e-9)


def test_xi_approx_has_mean_zero_and_the_covariance_of_its_formula():
    """xi = lambda * A^T eta with A = d g / d w2 and g = J_loss diag(h): Cov(xi) = lambda^2 A^T A."""
    p = _tiny.params()
    x, y = _tiny.inputs()
    lam = 0.8

    def g_of(w2):
        q = dict(p, w2=w2)
        h1, h2, logits = _tiny.forward(q, x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        g1, g2 = torch.autograd.grad(loss, [h1, h2], create_graph=True)
        return torch.cat([(g1 * h1).reshape(-1), (g2 * h2).reshape(-1)])

    a = jacobian(g_of, p["w2"].detach()).reshape(-1, p["w2"].numel())  # (K, P)
    expected = lam**2 * a.T @ a
    h1, h2, logits = _tiny.forward(p, x)
    loss = torch.nn.functional.cross_entropy(logits, y)
    torch.manual_seed(4)
    samples = []
    for _ in range(600):
        s = xi_approx_surrogate(loss, _sites(h1, h2), {"h1": lam, "h2": lam})
        assert s.item() == 0.0
        samples.append(torch.autograd.grad(s, p["w2"], retain_graph=True)[0].reshape(-1))
    xi = torch.stack(samples)
    assert (xi.mean(0).abs() < 4 * expected.diagonal().sqrt() / len(samples) ** 0.5 + 1e-12).all()
    empirical = xi.T @ xi / xi.shape[0]
    assert torch.linalg.norm(empirical - expected) / torch.linalg.norm(expected) < 0.15


@pytest.mark.parametrize("form", ["hessian", "identity", "loss_jacobian"])
def test_penalty_gradient_passes_float64_gradcheck(form):
    p = _tiny.params()
    x, y = _tiny.inputs()

    def penalty(w1, w2, w3):
        h1, h2, logits = _tiny.forward({"w1": w1, "w2": w2, "w3": w3}, x)
        sites = _sites(h1, h2)
        gen = torch.Generator().manual_seed(0)  # the same labels / signs at every evaluation
        if form == "hessian":
            return r_approx(logits, sites, LAM, samples=2, generator=gen)
        if form == "identity":
            return r_approx_identity(logits, sites, LAM, generator=gen)
        return r_tilde_approx(logits, y, sites, LAM)

    assert torch.autograd.gradcheck(penalty, (p["w1"], p["w2"], p["w3"]), eps=1e-6, atol=1e-5)

"""A tiny float64 network with two dropout sites, for reference checks against full Jacobians and Hessians."""

import torch

C = 6  # classes


def params(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shapes = {"w1": (5, 4), "w2": (4, 5), "w3": (C, 4)}
    return {k: (torch.randn(s, generator=g, dtype=torch.float64) * 0.9).requires_grad_() for k, s in shapes.items()}


def inputs(seed: int = 1, n: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g, dtype=torch.float64), torch.randint(0, C, (n,), generator=g)


def head(p: dict, h2: torch.Tensor) -> torch.Tensor:
    return 2.0 * h2 @ p["w3"].T


def after_h1(p: dict, h1: torch.Tensor) -> torch.Tensor:
    return head(p, torch.tanh(h1 @ p["w2"].T))


def forward(p: dict, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(h1 (N, 5), h2 (N, 4), logits (N, C))``."""
    h1 = torch.tanh(x @ p["w1"].T)
    h2 = torch.tanh(h1 @ p["w2"].T)
    return h1, h2, head(p, h2)


def loss_hessian(logits_row: torch.Tensor) -> torch.Tensor:
    """``H_out = diag(p) - p p^T`` of the cross-entropy loss (App. E, eq. E.4)."""
    prob = torch.softmax(logits_row, -1)
    return torch.diag(prob) - torch.outer(prob, prob)

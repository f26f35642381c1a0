"""EmbeddingNoise: statistics of the noise, identity in eval and at sigma 0, which modules get hooked, gradients."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embreg.embeddings import MixedDimensionEmbedding, MixedDimensionEmbeddingBag
from embreg.errors import ConfigError
from embreg.nn import EmbeddingDropout
from embreg.regularizers.embedding_noise import EmbeddingNoise, embedding_modules
from embreg.sse import SSE, SSEEmbedding


class TwoTables(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.user = nn.Embedding(50, 8)
        self.item = MixedDimensionEmbedding([10, 40], [8, 4], base_dim=8)
        self.head = nn.Linear(8, 1)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        return self.head(self.user(users) * self.item(items)).squeeze(-1)


def test_noise_has_mean_zero_and_std_sigma() -> None:
    """Statistical: 200,000 draws; the sample mean is within 5 standard errors of 0 and the sample std within
    1% of sigma (its standard error is sigma / sqrt(2n) = 0.16% of sigma)."""
    torch.manual_seed(0)
    sigma = 0.05
    table = nn.Embedding(100, 20)
    model = EmbeddingNoise(sigma).prepare(nn.Sequential(table)).train()
    ids = torch.randint(0, 100, (10_000,))
    with torch.no_grad():
        noise = model(ids) - table.weight[ids]
    n = noise.numel()
    assert n == 200_000
    assert abs(noise.mean().item()) < 5 * sigma / n**0.5
    assert noise.std().item() == pytest.approx(sigma, rel=0.01)


def test_identity_in_eval_and_at_sigma_zero() -> None:
    torch.manual_seed(0)
    model = TwoTables()
    users, items = torch.randint(0, 50, (32,)), torch.randint(0, 50, (32,))
    clean = model(users, items)
    noise = EmbeddingNoise(0.1)
    noise.prepare(model)
    assert torch.equal(model.eval()(users, items), clean)
    assert not torch.equal(model.train()(users, items), clean)
    noise.remove()
    assert torch.equal(model.train()(users, items), clean)
    EmbeddingNoise(0.0).prepare(model)
    assert torch.equal(model.train()(users, items), clean)


def test_shapes_and_dtypes_are_kept() -> None:
    bag = MixedDimensionEmbeddingBag([5, 15], [6, 3], base_dim=6, mode="mean")
    model = EmbeddingNoise(0.1).prepare(nn.ModuleList([bag])).train()
    out = model[0](torch.randint(0, 20, (4, 3)))
    assert out.shape == (4, 6) and out.dtype == torch.float32


def test_only_top_level_embeddings_are_hooked() -> None:
    inner = nn.Embedding(30, 4)
    model = nn.ModuleDict(
        {
            "md": MixedDimensionEmbedding([10, 20], [4, 2], base_dim=4),  # counted once, not per block
            "dropped": EmbeddingDropout(inner, 0.0),  # hooked; its wrapped table is not
            "tied": nn.ModuleList([inner]),  # the same table reached another way
            "sse": SSEEmbedding(nn.Embedding(7, 4), SSE(7, p=0.1)),  # the table inside an SSE wrapper
            "bag": nn.EmbeddingBag(9, 4),
        }
    )
    names = [name for name, _ in embedding_modules(model)]
    assert names == ["md", "dropped", "sse.embedding", "bag"]
    noise = EmbeddingNoise(0.1)
    noise.prepare(model)
    noise.prepare(model)  # preparing again does not stack hooks
    assert noise.num_hooked == 4
    assert sum(len(m._forward_hooks) for m in model.modules()) == 4


def test_table_gradient_is_unchanged_for_a_linear_loss() -> None:
    """A loss linear in the embedding output, ``sum(c * e(ids))``, has a gradient w.r.t. the table that does not
    depend on the additive noise: it equals the noiseless gradient exactly (so, a fortiori, in expectation)."""
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (64,))
    c = torch.randn(64, 8)

    def table_grads(sigma: float | None) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(1)
        model = TwoTables()
        if sigma is not None:
            EmbeddingNoise(sigma).prepare(model)
        model.train()
        (c * model.user(ids)).sum().add((c * model.item(ids)).sum()).backward()
        return model.user.weight.grad.clone(), model.item.flat_rows.grad.clone()

    clean = table_grads(None)
    for got, want in zip(table_grads(0.3), clean):
        torch.testing.assert_close(got, want)


def test_a_model_without_embeddings_is_refused() -> None:
    with pytest.raises(ConfigError, match="has no embedding module"):
        EmbeddingNoise(0.1).prepare(nn.Sequential(nn.Linear(3, 3)))


@pytest.mark.parametrize("sigma", [-0.1, float("nan"), "0.1"])
def test_bad_sigma_is_refused(sigma: object) -> None:
    with pytest.raises(ConfigError, match="sigma"):
        EmbeddingNoise(sigma)  # type: ignore[arg-type]

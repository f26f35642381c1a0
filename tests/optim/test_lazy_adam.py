"""``sparse-adam`` (:class:`embreg.optim.lazy_adam.LazyAdam`): Adam on dense gradients, lazy Adam on sparse ones."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embreg.embeddings import MixedDimensionEmbedding
from embreg.errors import ConfigError
from embreg.optim.lazy_adam import LazyAdam
from embreg.optim.optimizers import OPTIMIZERS, check_sparse_gradients, optimizer_factory
from embreg.recipes.recipe import TrainConfig
from embreg.runs.checkpoint import load_checkpoint, save_checkpoint


class Tiny(nn.Module):
    """A table (dense or sparse gradients) and a dense layer on top."""

    def __init__(self, sparse: bool, rows: int = 12, dim: int = 4) -> None:
        super().__init__()
        self.table = nn.Embedding(rows, dim, sparse=sparse)
        self.out = nn.Linear(dim, 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.table(ids)).squeeze(-1)


def _batches(steps: int, rows: int = 12, size: int = 6, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, rows // 2, (size,), generator=g), torch.randn(size, generator=g)) for _ in range(steps)]


def _step(model: nn.Module, optimizer: torch.optim.Optimizer, ids: torch.Tensor, target: torch.Tensor) -> None:
    optimizer.zero_grad(set_to_none=True)
    (model(ids) - target).pow(2).mean().backward()
    optimizer.step()


def _twins(sparse_a: bool, sparse_b: bool) -> tuple[Tiny, Tiny]:
    torch.manual_seed(0)
    a = Tiny(sparse_a)
    b = Tiny(sparse_b)
    b.load_state_dict(a.state_dict())
    return a, b


def test_sparse_adam_is_registered():
    assert "sparse-adam" in OPTIMIZERS
    assert isinstance(optimizer_factory("sparse-adam", lr=0.01)(Tiny(True).parameters()), LazyAdam)


def test_dense_gradients_equal_torch_adam_exactly():
    ours, theirs = _twins(False, False)
    lazy = LazyAdam(ours.parameters(), lr=0.05, betas=(0.8, 0.99), eps=1e-7)
    adam = torch.optim.Adam(theirs.parameters(), lr=0.05, betas=(0.8, 0.99), eps=1e-7)
    for ids, target in _batches(7):
        _step(ours, lazy, ids, target)
        _step(theirs, adam, ids, target)
        for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
            assert torch.equal(p, q), name
    for p, q in zip(ours.parameters(), theirs.parameters()):
        mine, torchs = lazy.state[p], adam.state[q]
        assert float(mine["step"]) == float(torchs["step"]) == 7
        assert torch.equal(mine["exp_avg"], torchs["exp_avg"]) and torch.equal(mine["exp_avg_sq"], torchs["exp_avg_sq"])


def test_sparse_gradients_equal_torch_sparse_adam_and_dense_ones_adam():
    """One LazyAdam over a sparse table and a dense layer = SparseAdam on the table + Adam on the layer, bit for bit
    (the same arithmetic, rows gathered with index_select instead of sparse masks)."""
    ours, theirs = _twins(True, True)
    lazy = LazyAdam(ours.parameters(), lr=0.05)
    sparse_adam = torch.optim.SparseAdam([theirs.table.weight], lr=0.05)
    adam = torch.optim.Adam(theirs.out.parameters(), lr=0.05)
    for ids, target in _batches(6):  # ids repeat within a batch: the gradients are coalesced first
        _step(ours, lazy, ids, target)
        sparse_adam.zero_grad(set_to_none=True)
        adam.zero_grad(set_to_none=True)
        (theirs(ids) - target).pow(2).mean().backward()
        sparse_adam.step()
        adam.step()
        assert torch.equal(ours.table.weight, theirs.table.weight)
        assert torch.equal(ours.out.weight, theirs.out.weight) and torch.equal(ours.out.bias, theirs.out.bias)
    state, reference = lazy.state[ours.table.weight], sparse_adam.state[theirs.table.weight]
    assert int(state["step"]) == reference["step"] == 6
    assert torch.equal(state["exp_avg"], reference["exp_avg"])
    assert torch.equal(state["exp_avg_sq"], reference["exp_avg_sq"])


def test_rows_absent_from_the_batch_are_untouched():
    model = Tiny(True)
    optimizer = LazyAdam(model.parameters(), lr=0.1)
    _step(model, optimizer, torch.tensor([0, 1, 1]), torch.zeros(3))
    weight = model.table.weight.detach().clone()
    state = optimizer.state[model.table.weight]
    moments = state["exp_avg"].clone(), state["exp_avg_sq"].clone()
    _step(model, optimizer, torch.tensor([2, 5, 2]), torch.ones(3))
    moved = (model.table.weight != weight).any(dim=1)
    assert moved.nonzero().flatten().tolist() == [2, 5]
    untouched = ~moved
    assert torch.equal(state["exp_avg"][untouched], moments[0][untouched])  # rows 0 and 1 keep their moments
    assert torch.equal(state["exp_avg_sq"][untouched], moments[1][untouched])
    assert moments[0][:2].abs().sum() > 0  # (they had moments to keep)


def test_mixed_dimension_flat_rows_sparse_gradient_matches_sparse_adam():
    """Sparse mixed-dimension tables give a 1-D sparse gradient over ``flat_rows``; projections stay dense."""
    torch.manual_seed(0)
    ours = MixedDimensionEmbedding([3, 9], [4, 2], base_dim=4, sparse=True)
    theirs = MixedDimensionEmbedding([3, 9], [4, 2], base_dim=4, sparse=True)
    theirs.load_state_dict(ours.state_dict())
    lazy = LazyAdam(ours.parameters(), lr=0.05)
    sparse_adam = torch.optim.SparseAdam([theirs.flat_rows], lr=0.05)
    adam = torch.optim.Adam([theirs.flat_projections], lr=0.05)
    before = ours.flat_rows.detach().clone()
    ids = torch.tensor([0, 4, 4, 7])
    for optimizers, layer in (((lazy,), ours), ((sparse_adam, adam), theirs)):
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        layer(ids).pow(2).sum().backward()
        assert layer.flat_rows.grad.is_sparse and not layer.flat_projections.grad.is_sparse
        for optimizer in optimizers:
            optimizer.step()
    assert torch.equal(ours.flat_rows, theirs.flat_rows)
    assert torch.equal(ours.flat_projections, theirs.flat_projections)
    assert (ours.flat_rows != before).sum() == 4 + 2 * 2  # row 0 (dim 4) and rows 4, 7 (dim 2) of the blocks


def test_state_round_trips_through_checkpoints(tmp_path):
    """save -> load -> the continued run equals the uninterrupted one, bit for bit."""
    batches = _batches(8, seed=3)
    torch.manual_seed(1)
    model = Tiny(True)
    optimizer = LazyAdam(model.parameters(), lr=0.03)
    for ids, target in batches[:4]:
        _step(model, optimizer, ids, target)
    path = save_checkpoint(tmp_path / "last.safetensors", {"model": model.state_dict(), "opt": optimizer.state_dict()})
    state = load_checkpoint(path)
    resumed = Tiny(True)
    resumed.load_state_dict(state["model"])
    resumed_optimizer = LazyAdam(resumed.parameters(), lr=0.5)  # the saved lr comes back with the groups
    resumed_optimizer.load_state_dict(state["opt"])
    assert resumed_optimizer.param_groups[0]["lr"] == 0.03
    for ids, target in batches[4:]:
        _step(model, optimizer, ids, target)
        _step(resumed, resumed_optimizer, ids, target)
    for p, q in zip(model.parameters(), resumed.parameters()):
        assert torch.equal(p, q)
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(optimizer.state[p][key], resumed_optimizer.state[q][key]), key


def test_weight_decay_is_refused():
    with pytest.raises(ValueError, match="sparse-adam takes no weight decay"):
        optimizer_factory("sparse-adam", lr=0.01, weight_decay=0.1)
    with pytest.raises(ConfigError, match="train.optimizer=sparse-adam takes no weight decay"):
        TrainConfig(optimizer="sparse-adam", weight_decay=0.1, device="cpu")


def test_sparse_tables_refuse_settings_that_cannot_take_their_gradients():
    sparse, dense = Tiny(True), Tiny(False)
    for name in ("adam", "amsgrad", "adamw"):
        with pytest.raises(ConfigError, match=r"train\.optimizer=sparse-adam"):
            check_sparse_gradients(sparse, name)
        check_sparse_gradients(dense, name)  # dense tables: anything goes
    for name in ("sparse-adam", "sgd", "adagrad"):
        check_sparse_gradients(sparse, name)
    with pytest.raises(ConfigError, match="train.weight_decay=0"):
        check_sparse_gradients(sparse, "sgd", weight_decay=0.01)
    with pytest.raises(ConfigError, match="train.clip_norm=null"):
        check_sparse_gradients(sparse, "sparse-adam", clip_norm=1.0)


def test_invalid_arguments():
    params = Tiny(False).parameters()
    with pytest.raises(ValueError, match="lr"):
        LazyAdam(params, lr=0.0)
    with pytest.raises(ValueError, match="betas"):
        LazyAdam(Tiny(False).parameters(), betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="eps"):
        LazyAdam(Tiny(False).parameters(), eps=0.0)

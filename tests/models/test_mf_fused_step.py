"""The fused MF training step (``train.fused_step``) against the autograd step it replaces."""

from __future__ import annotations

import math

import pytest
import torch

from embreg.batching.batches import TensorBatches
from embreg.embeddings import MixedDimensionEmbedding
from embreg.errors import ConfigError, TrainingError
from embreg.models.mf import BiasedMF
from embreg.models.mf_fused_step import _KERNEL, fused_step_refusal
from embreg.models.user_item import zero_table
from embreg.optim.lazy_adam import LazyAdam
from embreg.optim.optimizers import optimizer_factory
from embreg.regularizers.embedding_noise import EmbeddingNoise
from embreg.sse import SSE
from embreg.tasks.ratings.evaluation import RatingEvaluator
from embreg.train.trainer import Trainer
from tests.helpers.native_backends import require_kernel

USERS, ITEMS, DIM = 40, 60, 12


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> object:
    return require_kernel(monkeypatch, "EMBREG_MF_KERNEL", _KERNEL.load)


def _model(*, sse: float = 0.0, l2: float = 0.0, sparse: bool = True, dropout: float = 0.0) -> BiasedMF:
    torch.manual_seed(0)
    users, items = torch.nn.Embedding(USERS, DIM, sparse=sparse), torch.nn.Embedding(ITEMS, DIM, sparse=sparse)
    torch.nn.init.normal_(users.weight, std=0.1)
    torch.nn.init.normal_(items.weight, std=0.1)
    transforms = {}
    if sse:
        transforms = {"user_transform": SSE(USERS, p=sse, seed=1), "item_transform": SSE(ITEMS, p=sse, seed=2)}
    return BiasedMF(
        users, items, zero_table(USERS), zero_table(ITEMS), global_mean=3.0, l2=l2, dropout=dropout, **transforms
    ).train()


def _batches(steps: int, size: int = 48) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    return [
        {
            "user": torch.randint(0, USERS, (size,), generator=g),
            "item": torch.randint(0, ITEMS, (size,), generator=g),
            "rating": torch.randint(1, 6, (size,), generator=g).float(),
        }
        for _ in range(steps)
    ]


def _autograd_step(model: BiasedMF, optimizer: torch.optim.Optimizer, batch: dict[str, torch.Tensor]) -> float:
    optimizer.zero_grad(set_to_none=True)
    loss = model.loss(batch, model(batch))
    loss.backward()
    optimizer.step()
    return loss.item()


def _assert_same_state(a: torch.optim.Optimizer, b: torch.optim.Optimizer, atol: float) -> None:
    for pa, pb in zip(a.param_groups[0]["params"], b.param_groups[0]["params"]):
        assert torch.allclose(pa, pb, atol=atol, rtol=0)
        for key, value in a.state[pa].items():
            assert torch.allclose(value, b.state[pb][key], atol=atol, rtol=0), key


@pytest.mark.parametrize("optimizer", ["sparse-adam", "sgd"])
def test_fused_steps_equal_autograd_steps_with_sse_and_l2(kernel: object, optimizer: str) -> None:
    reference, fused = _model(sse=0.2, l2=0.05), _model(sse=0.2, l2=0.05)
    make = optimizer_factory(optimizer, lr=0.05)
    opt_reference, opt_fused = make(reference.parameters()), make(fused.parameters())
    step = fused.fused_step(opt_fused)
    assert step is not None
    for batch in _batches(40):
        expected = _autograd_step(reference, opt_reference, batch)
        assert step(batch) == pytest.approx(expected, rel=1e-5)
    moved = (fused.user_embedding.weight - _model().user_embedding.weight).abs().max()
    assert moved > 1e-3  # the comparison is not between two untrained models
    _assert_same_state(opt_reference, opt_fused, atol=1e-6)
    ids = torch.arange(USERS).repeat(20)
    assert torch.equal(reference.user_transform(ids), fused.user_transform(ids))  # the swaps drew the same streams


def test_only_the_batch_rows_of_the_tables_move_and_every_bias_row_takes_adam(kernel: object) -> None:
    model = _model()
    optimizer = LazyAdam(model.parameters(), lr=0.1)
    step = model.fused_step(optimizer)
    before = [p.detach().clone() for p in model.parameters()]
    batch = {"user": torch.tensor([1, 1, 5]), "item": torch.tensor([2, 7, 7]), "rating": torch.tensor([5.0, 1, 4])}
    step(batch)
    moved = [(p != b).any(dim=1).nonzero().flatten().tolist() for p, b in zip(model.parameters(), before)]
    assert moved[:2] == [[1, 5], [2, 7]]
    assert moved[2] == [1, 5] and moved[3] == [2, 7]  # first step: rows without gradient keep zero moments
    step({"user": torch.tensor([0]), "item": torch.tensor([0]), "rating": torch.tensor([3.0])})
    # dense Adam on the biases: rows 1, 5 (user) keep moving by their momentum though absent from this batch
    assert (model.user_bias.weight[[1, 5]] != 0).all()
    assert float(optimizer.state[model.user_bias.weight]["step"]) == 2.0


def test_a_non_finite_loss_changes_nothing_and_the_trainer_stops(kernel: object) -> None:
    model = _model()
    optimizer = LazyAdam(model.parameters(), lr=0.1)
    step = model.fused_step(optimizer)
    before = [p.detach().clone() for p in model.parameters()]
    loss = step({"user": torch.tensor([0]), "item": torch.tensor([1]), "rating": torch.tensor([float("nan")])})
    assert math.isnan(loss)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))
    assert optimizer.state[model.user_embedding.weight]["step"] == 0

    data = {"user": torch.tensor([0, 1]), "item": torch.tensor([1, 2]), "rating": torch.tensor([float("inf"), 3.0])}
    trainer = Trainer(
        _model(), optimizer_factory("sparse-adam", 0.1), TensorBatches(data, batch_size=2),
        RatingEvaluator({"valid": data, "test": data}), epochs=1, progress=False, fused_step=True,
    )  # fmt: skip
    with pytest.raises(TrainingError, match="loss became"):
        trainer.fit()


def test_out_of_range_ids_are_a_clear_error(kernel: object) -> None:
    model = _model()
    step = model.fused_step(LazyAdam(model.parameters(), lr=0.1))
    with pytest.raises(RuntimeError, match=f"item id {ITEMS} is outside"):
        step({"user": torch.tensor([0]), "item": torch.tensor([ITEMS]), "rating": torch.tensor([3.0])})


def test_a_table_of_the_wrong_kind_is_named_with_its_dtype_sizes_and_device(kernel: object) -> None:
    model = _model()
    step = model.fused_step(torch.optim.SGD(model.parameters(), lr=0.1))
    assert step is not None
    step.tables = type(step.tables)([step.tables[0].double(), *step.tables[1:]])
    with pytest.raises(
        RuntimeError, match=rf"^embreg MF step: the user table must be .* got Double \[{USERS}, {DIM}\] on cpu$"
    ):
        step({"user": torch.tensor([0]), "item": torch.tensor([0]), "rating": torch.tensor([3.0])})


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: (_model(dropout=0.1), "sparse-adam"), "dropout on the vectors"),
        (lambda: (_model(sparse=False), "sparse-adam"), "must be sparse"),
        (lambda: (_model(), "adagrad"), "the optimizer is Adagrad"),
        (
            lambda: (
                BiasedMF(
                    MixedDimensionEmbedding([20, 20], [12, 4], 12),
                    torch.nn.Embedding(ITEMS, DIM, sparse=True),
                    zero_table(USERS),
                    zero_table(ITEMS),
                ),  # fmt: skip
                "sparse-adam",
            ),
            "MixedDimensionEmbedding",
        ),
    ],
)
def test_models_and_optimizers_the_kernel_does_not_serve_are_refused(make, reason: str) -> None:
    model, optimizer = make()
    optimizer = optimizer_factory(optimizer, lr=0.1)(model.parameters())
    assert reason in (fused_step_refusal(model, optimizer) or "")
    with pytest.raises(ConfigError, match="train.fused_step"):
        model.fused_step(optimizer)


def test_sgd_with_momentum_is_refused() -> None:
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    assert "without momentum" in (fused_step_refusal(model, optimizer) or "")


def _trainer(run_dir, epochs: int, **kwargs) -> Trainer:
    data = _batches(1, size=400)[0]
    return Trainer(
        _model(sse=0.1, l2=0.01), optimizer_factory("sparse-adam", 0.02), TensorBatches(data, batch_size=64, seed=5),
        RatingEvaluator({"valid": data, "test": data}), epochs=epochs, progress=False, run_dir=run_dir, **kwargs,
    )  # fmt: skip


def test_the_trainer_refuses_what_needs_autograd() -> None:
    with pytest.raises(ConfigError, match="regularisers.*gradient clipping"):
        _trainer(None, 1, fused_step=True, regularizers=[EmbeddingNoise(0.1)], clip_norm=1.0)


def test_a_fused_run_equals_the_autograd_run_and_resumes_exactly(kernel: object, tmp_path) -> None:
    autograd = _trainer(tmp_path / "autograd", 3).fit()
    fused = _trainer(tmp_path / "fused", 3, fused_step=True).fit()
    for key in ("val_rmse", "test_rmse", "best_epoch"):
        assert fused.metrics[key] == pytest.approx(autograd.metrics[key], rel=1e-5)
    _trainer(tmp_path / "resumed", 1, fused_step=True).fit()
    resumed = _trainer(tmp_path / "resumed", 3, fused_step=True)
    resumed.fit(resume=True)
    uninterrupted = _trainer(tmp_path / "uninterrupted", 3, fused_step=True)
    uninterrupted.fit()
    for a, b in zip(resumed.model.parameters(), uninterrupted.model.parameters()):
        assert torch.equal(a, b)
    untimed = [[{k: v for k, v in r.items() if k != "seconds"} for r in t.history] for t in (resumed, uninterrupted)]
    assert untimed[0] == untimed[1]


def test_with_the_kernel_off_the_trainer_takes_the_autograd_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBREG_MF_KERNEL", "off")
    trainer = _trainer(None, 1, fused_step=True)
    assert trainer._fused is None
    assert math.isfinite(trainer.fit().metrics["val_rmse"])


def test_the_update_is_the_same_on_one_and_two_threads(kernel: object) -> None:
    rows = 40_000  # more distinct rows and bias entries than one thread's share of each update
    g = torch.Generator().manual_seed(0)
    batches = [{"user": torch.randint(0, rows, (5000,), generator=g), "item": torch.randint(0, 50, (5000,), generator=g),
                "rating": torch.rand(5000, generator=g) * 4 + 1} for _ in range(3)]  # fmt: skip
    results = []
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            torch.manual_seed(0)
            model = BiasedMF.build(rows, 50, 4, global_mean=3.0, l2=0.01)
            model.user_embedding.sparse = model.item_embedding.sparse = True
            step = model.fused_step(LazyAdam(model.parameters(), lr=0.05))
            for batch in batches:
                step(batch)
            results.append([p.detach().clone() for p in model.parameters()])
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for a, b in zip(*results))

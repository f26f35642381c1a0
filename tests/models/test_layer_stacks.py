"""Layer stacks of the recommenders (NCF, DLRM): forward unchanged, the stack reproduces it, LNSR/R3F/SMART train.

lnsr-noise-stability-bert.txt, Sec. 3.1 (LNSR on the states h_0..h_L) and 5.4 (R3F, SMART: noise on h_0).
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from embreg.batching.batches import TensorBatches
from embreg.embeddings import MixedDimensionEmbedding
from embreg.models import DLRM, NCF
from embreg.models.hidden_states import hidden_state_key
from embreg.nn import layer_stack as nn_layer_stack
from embreg.optim.optimizers import optimizer_factory
from embreg.regularizers import LNSR, R3F, SMART, LayerNoise, StepContext, layer_stack
from embreg.tasks.ratings.evaluation import RatingEvaluator
from embreg.train.seeding import seed_everything
from embreg.train.trainer import Trainer


# ------------------------------------------------------------------------------------------------------ models
def _ncf(kind: str = "uniform", dropout: float = 0.0) -> NCF:
    torch.manual_seed(0)
    if kind == "mixed":
        return NCF(
            MixedDimensionEmbedding([3, 5], [6, 2], 6),
            MixedDimensionEmbedding([4, 6], [6, 3], 6),
            mlp_dims=(8, 8, 4),
            global_mean=3.0,
            dropout=dropout,
        )
    if kind == "separate":
        return NCF(
            nn.Embedding(8, 6),
            nn.Embedding(10, 6),
            mlp_dims=(8, 4),
            global_mean=3.0,
            dropout=dropout,
            mlp_user_embedding=nn.Embedding(8, 5),
            mlp_item_embedding=nn.Embedding(10, 3),
        )
    return NCF(nn.Embedding(8, 6), nn.Embedding(10, 6), mlp_dims=(8, 8, 4), global_mean=3.0, dropout=dropout)


def _ncf_batch(n: int = 12) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {
        "user": torch.randint(0, 8, (n,), generator=g),
        "item": torch.randint(0, 10, (n,), generator=g),
        "rating": torch.rand(n, generator=g) * 4 + 1,
    }


def _dlrm(kind: str = "uniform", num_dense: int = 3, top_mlp=(8, 6)) -> DLRM:
    torch.manual_seed(0)
    if kind == "mixed":
        fields = [MixedDimensionEmbedding([5], [4], 4), MixedDimensionEmbedding([2, 5], [4, 2], 4)]
    else:
        fields = [nn.Embedding(5, 4), nn.Embedding(7, 4)]
    return DLRM(fields, num_dense=num_dense, bottom_mlp=(5,), top_mlp=top_mlp)


def _dlrm_batch(n: int = 12) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {
        "categorical": torch.stack([torch.randint(0, 5, (n,), generator=g), torch.randint(0, 7, (n,), generator=g)], 1),
        "dense": torch.randn(n, 3, generator=g),
        "label": (torch.rand(n, generator=g) > 0.5).float(),
    }


# The forward passes as they were before the layer stacks: the new forwards must give the same bits.
def _old_ncf_forward(model: NCF, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    users, items = model.user_transform(batch["user"]), model.item_transform(batch["item"])
    u, v = model.user_embedding(users), model.item_embedding(items)
    if model.mlp_user_embedding is not None:
        mlp_in = torch.cat([model.mlp_user_embedding(users), model.mlp_item_embedding(items)], dim=-1)
    else:
        mlp_in = torch.cat([u, v], dim=-1)
    fused = torch.cat([u * v, model.mlp(mlp_in)], dim=-1)
    return model.global_mean + model.output(fused).squeeze(-1)


def _old_dlrm_forward(model: DLRM, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    vectors = []
    if model.bottom is not None:
        vectors.append(model.bottom(batch["dense"]))
    vectors.extend(emb(batch["categorical"][:, j]) for j, emb in enumerate(model.embeddings))
    stacked = torch.stack(vectors, dim=1)
    gram = stacked @ stacked.transpose(1, 2)
    pairs = gram[:, model.pair_rows, model.pair_cols]
    top_in = torch.cat([vectors[0], pairs], dim=1) if model.bottom is not None else pairs
    return model.top(top_in).squeeze(-1)


CASES = [
    pytest.param(lambda: _ncf(), _ncf_batch, _old_ncf_forward, id="ncf"),
    pytest.param(lambda: _ncf("mixed"), _ncf_batch, _old_ncf_forward, id="ncf-mixed-dim"),
    pytest.param(lambda: _ncf("separate"), _ncf_batch, _old_ncf_forward, id="ncf-separate-mlp-tables"),
    pytest.param(lambda: _dlrm(), _dlrm_batch, _old_dlrm_forward, id="dlrm"),
    pytest.param(lambda: _dlrm("mixed"), _dlrm_batch, _old_dlrm_forward, id="dlrm-mixed-dim"),
    pytest.param(lambda: _dlrm(num_dense=0), _dlrm_batch, _old_dlrm_forward, id="dlrm-no-dense"),
    pytest.param(lambda: _dlrm(top_mlp=()), _dlrm_batch, _old_dlrm_forward, id="dlrm-no-top-hidden"),
]


def _head_bias(model: nn.Module) -> torch.Tensor:
    return model.output.bias if isinstance(model, NCF) else model.top[len(model.top) - 1].bias


# ------------------------------------------------------------------------------------------------------ tests
@pytest.mark.parametrize(("make", "make_batch", "old_forward"), CASES)
def test_forward_is_bit_identical_to_the_old_computation(make, make_batch, old_forward) -> None:
    model, batch = make().eval(), make_batch()
    with torch.no_grad():
        assert torch.equal(model(batch).predictions, old_forward(model, batch))


def test_ncf_forward_with_dropout_in_training_draws_the_old_masks() -> None:
    model, batch = _ncf(dropout=0.3).train(), _ncf_batch()
    torch.manual_seed(5)
    new = model(batch).predictions
    torch.manual_seed(5)
    assert torch.equal(new, _old_ncf_forward(model, batch))


def test_ncf_saved_value_with_fixed_seed() -> None:
    model = NCF(nn.Embedding(4, 3), nn.Embedding(5, 3), mlp_dims=(4, 2), global_mean=3.0).eval()
    torch.manual_seed(0)
    for p in model.parameters():
        nn.init.uniform_(p, -0.5, 0.5)
    out = model({"user": torch.tensor([0, 3]), "item": torch.tensor([1, 4])}).predictions
    reference = _old_ncf_forward(model, {"user": torch.tensor([0, 3]), "item": torch.tensor([1, 4])})
    assert out.tolist() == reference.tolist()


@pytest.mark.parametrize(("make", "make_batch", "old_forward"), CASES)
def test_stack_reproduces_the_forward_and_returns_every_state(make, make_batch, old_forward) -> None:
    model, batch = make().eval(), make_batch()
    out = model(batch)
    stack = layer_stack(model)
    states = stack.clean_states(out)
    assert len(states) == stack.num_layers + 1
    again = stack.run(states[0], batch, 1)
    for clean, rerun in zip(states[1:], again, strict=True):
        torch.testing.assert_close(rerun, clean, rtol=0, atol=0)
    torch.testing.assert_close(stack.predict(again[-1], batch), out.predictions, rtol=1e-6, atol=1e-6)
    for start in range(2, stack.num_layers + 1):  # from any layer b
        assert torch.equal(stack.run(states[start - 1], batch, start)[-1], states[-1])


def test_state_shapes_and_the_old_hidden_keys_stay() -> None:
    ncf, nb = _ncf().eval(), _ncf_batch()
    out = ncf(nb)
    assert {"user_vectors", "item_vectors"} <= set(out.hidden)
    assert [tuple(out.hidden[hidden_state_key(i)].shape) for i in range(4)] == [(12, 12), (12, 14), (12, 14), (12, 10)]
    h0 = out.hidden[hidden_state_key(0)]
    assert torch.equal(h0, torch.cat([out.hidden["user_vectors"], out.hidden["item_vectors"]], -1))
    dlrm, db = _dlrm().eval(), _dlrm_batch()
    out = dlrm(db)
    assert "interactions" in out.hidden and out.hidden["interactions"].shape == (12, 3)
    assert [tuple(out.hidden[hidden_state_key(i)].shape) for i in range(3)] == [(12, 3, 4), (12, 8), (12, 6)]
    assert torch.equal(out.hidden[hidden_state_key(0)][:, 0], dlrm.bottom(db["dense"]))


def test_state_dict_keys_are_unchanged() -> None:
    """The stack layers borrow the MLP blocks: no new parameters, buffers or checkpoint keys."""
    ncf = _ncf()
    assert not any(k.startswith("stack_layers") for k in ncf.state_dict())
    assert sum(p.numel() for p in ncf.stack_layers.parameters()) == 0
    assert len(list(ncf.parameters())) == len(dict(ncf.named_parameters()))
    dlrm = _dlrm()
    assert not any(k.startswith("stack_layers") for k in dlrm.state_dict())
    assert "pair_rows" not in dlrm.state_dict() and dlrm.pair_rows.tolist() == [1, 2, 2]


@pytest.mark.parametrize(("make", "make_batch", "old_forward"), CASES)
@pytest.mark.parametrize(
    "reg",
    [
        pytest.param(lambda: R3F(weight=1.0, sigma=1e-3), id="r3f"),
        pytest.param(lambda: SMART(weight=1.0, epsilon=1e-3), id="smart"),
        pytest.param(lambda: LNSR(sigma=0.1), id="lnsr"),
        pytest.param(lambda: LNSR(sigma=0.1, replay_dropout=False), id="lnsr-fresh-dropout"),
    ],
)
def test_penalty_is_finite_and_reaches_every_parameter(make, make_batch, old_forward, reg) -> None:
    model, batch = make().train(), make_batch()
    regularizer = reg()
    model = regularizer.prepare(model)
    value = regularizer.penalty(StepContext(model, batch, output=model(batch)))
    assert value.dim() == 0 and torch.isfinite(value) and value.item() > 0
    value.backward()
    head = {id(_head_bias(model))}
    if isinstance(regularizer, LNSR):  # LNSR compares states, the head is not part of it
        head |= {
            id(p) for p in (model.output if isinstance(model, NCF) else model.top[len(model.top) - 1]).parameters()
        }
    for name, p in model.named_parameters():
        if id(p) in head:
            continue
        assert p.grad is not None, name
        # The MLP branch is piecewise linear, so with separate MLP tables and small noise the change of the
        # prediction does not depend on those tables' values: their gradient is exactly 0 (but present).
        if name.startswith("mlp_") and "embedding" in name:
            continue
        if name.endswith("weight") or "embedding" in name or "flat" in name:
            assert p.grad.abs().sum() > 0, name


@pytest.mark.parametrize(("make", "make_batch", "old_forward"), CASES)
def test_r3f_at_sigma_zero_is_exactly_zero(make, make_batch, old_forward) -> None:
    model, batch = make().train(), make_batch()
    r3f = R3F(weight=1.0, sigma=0.0)
    model = r3f.prepare(model)
    assert r3f.penalty(StepContext(model, batch, output=model(batch))).item() == 0.0
    lnsr = LNSR(sigma=0.0)
    assert lnsr.penalty(StepContext(lnsr.prepare(model), batch, output=model(batch))).item() == 0.0


def test_lnsr_dropout_replay_in_ncf_with_dropout() -> None:
    """With replay, sigma -> 0 sends LNSR to 0 even though the MLP draws dropout masks."""
    model, batch = _ncf(dropout=0.5).train(), _ncf_batch()
    lnsr = LNSR(sigma=1e-12)
    model = lnsr.prepare(model)
    assert lnsr.penalty(StepContext(model, batch, output=model(batch))).item() < 1e-12
    fresh = LNSR(sigma=1e-12, replay_dropout=False)
    assert fresh.penalty(StepContext(fresh.prepare(model), batch, output=model(batch))).item() > 1e-6


def test_layer_noise_perturbs_the_embedding_output_in_training_only() -> None:
    model, batch = _ncf().eval(), _ncf_batch()
    clean = model(batch).predictions
    noise = LayerNoise(sigma=0.5)
    model = noise.prepare(model)
    assert torch.equal(model(batch).predictions, clean)
    model.train()
    assert not torch.allclose(model(batch).predictions, clean)
    noise.remove()
    dlrm = LayerNoise(sigma=0.5, start_layer=2).prepare(_dlrm().train())
    db = _dlrm_batch()
    assert not torch.allclose(dlrm(db).predictions, _old_dlrm_forward(dlrm, db))


def test_trainer_runs_ncf_with_r3f(synthetic_ratings) -> None:
    seed_everything(0)
    model = NCF(nn.Embedding(30, 4), nn.Embedding(40, 4), mlp_dims=(8, 4), global_mean=3.0, dropout=0.1)
    n = synthetic_ratings["user"].shape[0]
    train = {k: v[: n * 8 // 10] for k, v in synthetic_ratings.items()}
    valid = {k: v[n * 8 // 10 :] for k, v in synthetic_ratings.items()}
    trainer = Trainer(
        model,
        optimizer_factory("adam", 0.01),
        TensorBatches(train, 64, seed=0),
        RatingEvaluator({"valid": valid, "test": valid}, rating_range=(1.0, 5.0)),
        epochs=2,
        progress=False,
        regularizers=[R3F(weight=1.0, sigma=1e-3), LNSR(sigma=0.01)],
    )
    result = trainer.fit()
    assert result.metrics["epochs_run"] == 2 and torch.isfinite(torch.tensor(result.metrics["test_rmse"]))


def test_a_few_dlrm_steps_with_r3f_lower_the_loss() -> None:
    model, batch = _dlrm(), _dlrm_batch(64)
    r3f = R3F(weight=1.0, sigma=1e-3)
    model = r3f.prepare(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(15):
        output = model(batch)
        loss = model.loss(batch, output)
        total = loss + r3f.penalty(StepContext(model, batch, output=output, loss=loss))
        optimizer.zero_grad()
        total.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]
    assert F.binary_cross_entropy_with_logits(model(batch).predictions, batch["label"]).item() < losses[0]


# ------------------------------------------------------------------------------------------------------ floors
def test_the_abstract_stack_lives_on_the_nn_floor_and_is_re_exported() -> None:
    reg_layer_stack = importlib.import_module("embreg.regularizers.layer_stack")
    assert reg_layer_stack.LayerStack is nn_layer_stack.LayerStack
    assert reg_layer_stack.SequentialStack is nn_layer_stack.SequentialStack
    assert reg_layer_stack.check_layer_index is nn_layer_stack.check_layer_index
    assert set(reg_layer_stack.__all__) == {
        "LayerStack",
        "SequentialStack",
        "HFEncoderStack",
        "DropoutReplay",
        "hidden_state_key",
        "hidden_states_dict",
        "layer_stack",
        "check_layer_index",
    }
    assert nn_layer_stack._hidden_state_key(3) == hidden_state_key(3)


def test_models_and_nn_do_not_import_the_regularizers() -> None:
    code = (
        "import sys, embreg.nn.layer_stack\n"
        "assert not [m for m in sys.modules if m.startswith(('embreg.models', 'embreg.regularizers'))]\n"
        "import embreg.models\n"
        "assert not [m for m in sys.modules if m.startswith('embreg.regularizers')]\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "name", ["embreg.nn.layer_stack", "embreg.regularizers.layer_stack", "embreg.models.ncf", "embreg.models.dlrm"]
)
def test_docstring_examples_run(name) -> None:
    import doctest

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result

"""SASRec's layer stack: the blocks re-run from any input reproduce the forward pass, PAD positions stay out of every
term, and LNSR, R3F and SMART load and train on SASRec / SSE-PT recipes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embreg.errors import ConfigError
from embreg.models.sasrec import SASRec, SASRecConfig
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run, run_single
from embreg.regularizers import LNSR, R3F, SMART
from embreg.regularizers.base import StepContext
from embreg.regularizers.layer_stack import layer_stack

ITEMS, USERS, MAX_LEN = 9, 4, 5


def _model(user_dim: int = 0, dropout: float = 0.0) -> SASRec:
    torch.manual_seed(0)
    config = SASRecConfig(dim=8, user_dim=user_dim, heads=2, blocks=3, dropout=dropout)
    return SASRec(ITEMS, USERS, MAX_LEN, config)


def _batch(pad: int) -> dict[str, torch.Tensor]:
    return {
        "user": torch.tensor([0, 3]),
        "input": torch.tensor([[pad, pad, 1, 2, 3], [0, 4, 5, 1, 7]]),
        "target": torch.tensor([[pad, pad, 2, 3, 4], [4, 5, 1, 7, 8]]),
        "neg": torch.tensor([[pad, pad, 0, 5, 1], [3, 2, 0, 5, 6]]),
    }


@pytest.mark.parametrize("user_dim", [0, 4], ids=["sasrec", "sse-pt"])
def test_stack_reproduces_the_forward_and_returns_every_state(user_dim) -> None:
    model = _model(user_dim).eval()
    batch = _batch(model.pad)
    out = model(batch)
    stack = layer_stack(model)
    states = stack.clean_states(out)
    assert stack.num_layers == 3 and len(states) == 4
    assert all(s.shape == (2, MAX_LEN, 8 + user_dim) for s in states)
    rerun = stack.run(states[0], batch)
    for again, clean in zip(rerun, states[1:]):
        assert torch.equal(again, clean)
    assert torch.equal(stack.predict(rerun[-1], batch), out.predictions)
    assert stack.layer(2) is model.blocks[1]


def test_replayed_dropout_reproduces_the_training_pass() -> None:
    model = _model(dropout=0.3).train()
    lnsr = LNSR(sigma=1e-3)
    lnsr.prepare(model)
    batch = _batch(model.pad)
    out = model(batch)
    stack = layer_stack(model)
    states = stack.clean_states(out)
    with lnsr._replay.replaying(states[0]):
        rerun = stack.run(states[0], batch)
    assert torch.equal(rerun[-1], states[-1])


def test_noise_on_pad_positions_changes_nothing() -> None:
    model = _model().eval()
    batch = _batch(model.pad)
    out = model(batch)
    stack = layer_stack(model)
    h0 = stack.clean_states(out)[0]
    noise = torch.zeros_like(h0)
    noise[0, :2] = 5.0  # the two PAD positions of the first sequence
    assert torch.equal(stack.predict(stack.run(h0 + noise, batch)[-1], batch), out.predictions)


@pytest.mark.parametrize("reg", [LNSR(sigma=1e-2), R3F(sigma=1e-2), SMART(epsilon=1e-2)], ids=["lnsr", "r3f", "smart"])
def test_penalty_is_positive_and_reaches_the_blocks(reg) -> None:
    model = _model().train()
    reg.prepare(model)
    batch = _batch(model.pad)
    out = model(batch)
    penalty = reg.penalty(StepContext(model, batch, output=out))
    assert penalty.ndim == 0 and torch.isfinite(penalty) and penalty > 0
    penalty.backward()
    assert model.blocks[0].query.weight.grad is not None and model.blocks[0].query.weight.grad.abs().sum() > 0


def test_r3f_and_smart_compare_the_states_by_squared_error() -> None:
    model = _model().eval()
    batch = _batch(model.pad)
    out = model(batch)
    torch.manual_seed(1)
    auto = R3F(sigma=1e-2).penalty(StepContext(model, batch, output=out))
    torch.manual_seed(1)
    mse = R3F(sigma=1e-2, divergence="mse").penalty(StepContext(model, batch, output=out))
    assert torch.equal(auto, mse)
    for reg in (R3F(divergence="sym_kl"), SMART(divergence="sym_kl")):
        with pytest.raises(ConfigError, match="hidden states, not logits"):
            reg.prepare(model)


@pytest.fixture
def timed_file(tmp_path) -> list[str]:
    g = np.random.default_rng(0)
    rows = [f"u{u},i{int(g.integers(0, 25))},{1000 + t}" for u in range(20) for t in range(int(g.integers(4, 10)))]
    path = tmp_path / "timed.csv"
    path.write_text("user,item,ts\n" + "\n".join(rows) + "\n")
    return [
        f"data.path={path}",
        "data.user_col=user",
        "data.item_col=item",
        "data.timestamp_col=ts",
        "data.max_len=8",
        "data.eval_negatives=5",
        "train.epochs=1",
        "train.progress=false",
        "model.dim=8",
        "model.heads=2",
    ]


@pytest.mark.parametrize("name", ["lnsr", "r3f", "smart"])
@pytest.mark.parametrize("recipe", ["sasrec", "sse-pt"])
def test_noise_stability_regularizers_train_on_sasrec_recipes(timed_file, tmp_path, name, recipe) -> None:
    loaded = load_recipe(recipe, [*timed_file, f"regularizers=[{{name: {name}}}]"])
    assert type(build_run(loaded).regularizers[0]).__name__ == name.upper()
    metrics = run_single(loaded, tmp_path / "run").metrics
    assert 0.0 <= metrics["test_ndcg@10"] <= 1.0

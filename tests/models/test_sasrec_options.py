"""SASRec's design options (norm placement, embedding layer norm, embedding scale, position origin, initialisation):
each changes the model, keeps causality and padding invariance, and the post-LN model matches a hand-written
Transformer (Vaswani et al. 2017, Sec. 3.1) on a tiny input."""

from __future__ import annotations

import math

import pytest
import torch

from embreg.errors import ConfigError
from embreg.models.sasrec import SASRec, SASRecConfig
from embreg.models.sasrec_block import SASRecBlock
from embreg.recipes import load_recipe
from embreg.regularizers.layer_stack import layer_stack
from tests.helpers.threads import one_thread  # noqa: F401 (one_thread: autouse)

ITEMS, USERS, MAX_LEN = 10, 4, 6
PAD = ITEMS
OPTIONS = {
    "post-ln": {"norm": "post"},
    "embedding-norm": {"embedding_norm": True},
    "no-scale": {"embedding_scale": "none"},
    "positions-start": {"positions": "start"},
    "init-normal": {"init_std": 0.02},
}
RECBOLE = {"norm": "post", "embedding_norm": True, "embedding_scale": "none", "positions": "start", "init_std": 0.02}


def _model(user_dim: int = 0, dropout: float = 0.0, **options) -> SASRec:
    torch.manual_seed(0)
    config = SASRecConfig(dim=8, user_dim=user_dim, heads=2, dropout=dropout, loss="ce", **options)
    return SASRec(ITEMS, USERS, MAX_LEN, config)


def _batch() -> dict[str, torch.Tensor]:
    return {
        "user": torch.tensor([0, 3, 1]),
        "input": torch.tensor([[PAD, PAD, PAD, 1, 2, 3], [0, 4, 5, 1, 7, 2], [PAD, 9, 8, 7, 6, 5]]),
        "target": torch.tensor([[PAD, PAD, PAD, 2, 3, 4], [4, 5, 1, 7, 2, 8], [PAD, 8, 7, 6, 5, 0]]),
    }


@pytest.mark.parametrize(
    "kwargs",
    [{"norm": "middle"}, {"embedding_scale": "sqrt"}, {"positions": "left"}, {"embedding_norm": "yes"}],
)
def test_an_unknown_option_value_is_a_config_error(kwargs) -> None:
    with pytest.raises(ConfigError, match=f"model.{next(iter(kwargs))}="):
        SASRecConfig(**kwargs)


@pytest.mark.parametrize("options", list(OPTIONS.values()), ids=list(OPTIONS))
def test_each_option_changes_the_output(options) -> None:
    batch = _batch()
    base = _model(init_std=None).eval()(batch).predictions  # the original SASRec's design
    changed = _model(**{"init_std": None, **options}).eval()(batch).predictions
    assert changed.shape == base.shape == (3, MAX_LEN, 8)
    assert not torch.allclose(changed, base, atol=1e-4)


@pytest.mark.parametrize("options", [*OPTIONS.values(), RECBOLE], ids=[*OPTIONS, "recbole"])
@pytest.mark.parametrize("user_dim", [0, 4], ids=["sasrec", "sse-pt"])
def test_causality_padding_and_the_layer_stack_hold_under_every_option(options, user_dim) -> None:
    model = _model(user_dim, **options).eval()
    batch = _batch()
    out = model(batch)
    assert out.predictions.shape == (3, MAX_LEN, 8 + user_dim)
    assert model.score_next(batch).shape == (3, ITEMS)
    # a later item never changes an earlier state
    changed = {**batch, "input": batch["input"].clone()}
    changed["input"][1, 4] = 9
    again = model(changed).predictions
    assert torch.allclose(again[1, :4], out.predictions[1, :4], atol=1e-6)
    assert not torch.allclose(again[1, 4], out.predictions[1, 4])
    # left padding changes nothing: the first sequence alone, without its padding
    alone = model({"user": batch["user"][:1], "input": batch["input"][:1, 3:]}).predictions[0]
    assert torch.allclose(alone, out.predictions[0, 3:], atol=1e-5)
    # the layer stack re-runs the forward pass exactly
    stack = layer_stack(model)
    states = stack.clean_states(out)
    assert torch.equal(stack.predict(stack.run(states[0], batch)[-1], batch), out.predictions)


@pytest.mark.parametrize("options", [*OPTIONS.values(), RECBOLE], ids=[*OPTIONS, "recbole"])
def test_every_option_trains(options) -> None:
    model = _model(dropout=0.2, **options).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    batch = _batch()
    values = []
    for _ in range(20):
        value = model.loss(batch, model(batch))
        optimizer.zero_grad()
        value.backward()
        optimizer.step()
        values.append(value.item())
    assert all(math.isfinite(v) for v in values) and values[-1] < 0.8 * values[0]


def _layer_norm(x: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def _post_ln_block(block: SASRecBlock, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Vaswani et al.'s post-LN block, one sequence ``x (L, D)`` at a time, written out with loops over heads."""
    length, hidden = x.shape
    width = hidden // block.heads
    q = x @ block.query.weight.T + block.query.bias
    kv = x @ block.key_value.weight.T + block.key_value.bias
    k, v = kv[:, :hidden], kv[:, hidden:]
    heads = []
    for h in range(block.heads):
        cols = slice(h * width, (h + 1) * width)
        logits = q[:, cols] @ k[:, cols].T / math.sqrt(width)
        for i in range(length):
            for j in range(length):
                if j > i or (not valid[j] and j != i):
                    logits[i, j] = -math.inf
        heads.append(torch.softmax(logits, -1) @ v[:, cols])
    attended = torch.cat(heads, -1) @ block.out.weight.T + block.out.bias
    x = _layer_norm(x + attended, block.attention_norm)
    ffn = torch.relu(x @ block.ffn_in.weight.T + block.ffn_in.bias) @ block.ffn_out.weight.T + block.ffn_out.bias
    return _layer_norm(x + ffn, block.ffn_norm)


def test_the_recbole_configuration_matches_a_hand_written_post_ln_transformer() -> None:
    """Embedding: item + position (counted from the oldest item), LayerNorm, no scale; then post-LN blocks."""
    model = _model(**RECBOLE).eval()
    batch = _batch()
    out = model(batch).predictions
    table, positions = model.item_embedding.weight, model.position_embedding.weight
    with torch.no_grad():
        for row, items in enumerate(batch["input"]):
            valid = items != PAD
            order = torch.cumsum(valid.long(), 0) - 1
            x = table[items] + positions[order.clamp_min(0)]
            x = _layer_norm(x, model.embedding_norm) * valid.unsqueeze(-1)
            for block in model.blocks:
                x = _post_ln_block(block, x, valid) * valid.unsqueeze(-1)
            assert torch.allclose(out[row], x, atol=1e-5), row


def test_post_ln_drops_the_final_layer_norm_and_pre_ln_keeps_it() -> None:
    assert isinstance(_model(norm="post").final_norm, torch.nn.Identity)
    assert isinstance(_model().final_norm, torch.nn.LayerNorm)
    assert _model().embedding_norm is None and isinstance(
        _model(embedding_norm=True).embedding_norm, torch.nn.LayerNorm
    )


def test_normal_initialisation_reaches_the_positions_and_every_linear_weight() -> None:
    model = _model(init_std=0.02)
    assert model.position_embedding.weight.std().item() == pytest.approx(0.02, rel=0.3)
    assert model.blocks[0].key_value.weight.std().item() == pytest.approx(0.02, rel=0.3)
    xavier = _model(init_std=None)
    assert xavier.blocks[0].key_value.weight.std().item() > 0.1  # Xavier's scale at width 8 is far above 0.02


def test_the_default_initialisation_is_normal_with_std_0_02() -> None:
    assert SASRecConfig().init_std == 0.02
    assert load_recipe("sasrec").model.config.init_std == 0.02
    assert load_recipe("sasrec", ["model.init_std=null"]).model.config.init_std is None
    assert _model().blocks[0].key_value.weight.std().item() == pytest.approx(0.02, rel=0.3)


def test_the_shipped_recbole_recipe_makes_every_recbole_choice() -> None:
    config = load_recipe("sasrec-recbole").model.config
    for key, value in RECBOLE.items():
        assert getattr(config, key) == value, key
    recipe = load_recipe("sasrec-recbole")
    assert (recipe.data.train_examples, config.loss, recipe.train.weight_decay) == ("prefixes", "ce", 0.0)

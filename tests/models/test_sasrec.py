"""SASRec / SSE-PT (Kang & McAuley 2018, Sec. III; Wu et al. 2020) with SSE index transforms
(sse-stochastic-shared-embeddings.txt, Sec. 3.2 eq. 5 and Sec. 4.2 / Table 4)."""

from __future__ import annotations

import doctest
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import embreg.models.sasrec as sasrec_module
from embreg.errors import ConfigError, DataError
from embreg.models.sasrec import SASRec, SASRecConfig, build_sasrec
from embreg.registry import REGISTRY
from embreg.sse import SSE
from tests.helpers.threads import one_thread  # noqa: F401 (one_thread: autouse)

ITEMS, USERS, MAX_LEN = 12, 5, 8
PAD = ITEMS
SASREC = {"dim": 8, "heads": 2}
SSEPT = {"dim": 8, "user_dim": 4, "heads": 2}


def _model(loss="bce", dropout=0.2, **config) -> SASRec:
    torch.manual_seed(0)
    cfg = SASRecConfig(**{**SASREC, **config, "loss": loss, "dropout": dropout})
    return SASRec(ITEMS, USERS, MAX_LEN, cfg)


def _batch(seed=0, batch_size=4, length=MAX_LEN) -> dict[str, torch.Tensor]:
    """Left-padded toy sequences: input s_1..s_{n-1}, target s_2..s_n, one negative per target position."""
    g = torch.Generator().manual_seed(seed)
    inputs = torch.full((batch_size, length), PAD)
    targets = torch.full((batch_size, length), PAD)
    negs = torch.full((batch_size, length), PAD)
    for row in range(batch_size):
        n = int(torch.randint(2, length + 2, (1,), generator=g))
        seq = torch.randint(0, ITEMS, (n,), generator=g)
        inputs[row, length - (n - 1) :] = seq[:-1]
        targets[row, length - (n - 1) :] = seq[1:]
        negs[row, length - (n - 1) :] = torch.randint(0, ITEMS, (n - 1,), generator=g)
    return {
        "user": torch.randint(0, USERS, (batch_size,), generator=g),
        "input": inputs,
        "target": targets,
        "neg": negs,
    }


def test_docstring_example_runs() -> None:
    result = doctest.testmod(sasrec_module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result


# ---------------------------------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "kwargs",
    [
        {"dim": 0},
        {"user_dim": -1},
        {"blocks": 0},
        {"heads": 0},
        {"dim": 50, "heads": 4},  # 4 does not divide 50
        {"dim": 8, "user_dim": 3, "heads": 2},  # nor 11
        {"dropout": 1.0},
        {"dropout": -0.1},
        {"loss": "mse"},
        {"init_std": 0.0},
    ],
)
def test_config_errors(kwargs) -> None:
    with pytest.raises(ConfigError):
        SASRecConfig(**kwargs)


def test_user_transform_needs_user_dim() -> None:
    with pytest.raises(ConfigError, match="user_dim"):
        SASRec(ITEMS, USERS, MAX_LEN, SASRecConfig(**SASREC), user_transform=SSE(USERS, 0.1, seed=0))


def _context(user_dim=0, transforms=None) -> SimpleNamespace:
    sizes = {"item": ITEMS, "user": USERS, "label": ITEMS}
    embeddings = SimpleNamespace(name="uniform", config=SimpleNamespace(sparse=False))
    recipe = SimpleNamespace(data=SimpleNamespace(max_len=MAX_LEN), embeddings=embeddings)
    return SimpleNamespace(num_ids=lambda kind: sizes[kind], recipe=recipe, transforms=transforms or {})


def test_registered_builder() -> None:
    entry = REGISTRY.get("model", "sasrec")
    assert entry.build is build_sasrec
    assert entry.extra["tasks"] == ("next-item",) and entry.extra["kinds"] == ("user", "item", "label")
    item_sse = SSE(ITEMS, 0.1, seed=0)
    model = build_sasrec(SASRecConfig(**SSEPT), _context(transforms={"item": item_sse}))
    assert (model.num_items, model.num_users, model.max_len, model.hidden_dim) == (ITEMS, USERS, MAX_LEN, 12)
    assert model.item_transform is item_sse and model.user_transform is None and model.label_transform is None
    with pytest.raises(ConfigError, match="user_dim"):
        build_sasrec(SASRecConfig(**SASREC), _context(transforms={"user": SSE(USERS, 0.1, seed=0)}))


def test_initialisation() -> None:
    model = _model()
    assert torch.count_nonzero(model.item_embedding.weight[PAD]) == 0
    normal = _model(init_std=0.02, user_dim=4)
    assert normal.item_embedding.weight[:ITEMS].std().item() == pytest.approx(0.02, rel=0.3)
    assert normal.user_embedding is not None and torch.count_nonzero(normal.blocks[0].query.bias) == 0


# ------------------------------------------------------------------------------------- causality and padding
@pytest.mark.parametrize("config", [SASREC, SSEPT], ids=["sasrec", "sse-pt"])
def test_a_future_item_never_changes_earlier_outputs(config) -> None:
    model = _model(**config).eval()
    batch = _batch(1)
    batch["input"][:, :2] = torch.tensor([PAD, 3])  # some padding, then real items everywhere after
    batch["input"][:, 2:] = torch.randint(0, ITEMS, (4, MAX_LEN - 2))
    base = model(batch).predictions
    for position in range(2, MAX_LEN):
        changed = {**batch, "input": batch["input"].clone()}
        changed["input"][:, position] = (changed["input"][:, position] + 1) % ITEMS
        out = model(changed).predictions
        assert torch.allclose(out[:, :position], base[:, :position], atol=1e-6, rtol=0)
        assert not torch.allclose(out[:, position], base[:, position])


@pytest.mark.parametrize("config", [SASREC, SSEPT], ids=["sasrec", "sse-pt"])
def test_left_padding_does_not_change_the_last_output(config) -> None:
    model = _model(**config).eval()
    seq = torch.tensor([4, 1, 7])
    alone = {"user": torch.tensor([2]), "input": seq.unsqueeze(0)}
    padded = {
        "user": torch.tensor([2, 0]),
        "input": torch.stack([torch.cat([torch.full((5,), PAD), seq]), torch.arange(8) % ITEMS]),
    }
    a = model(alone).predictions[0]
    b = model(padded).predictions[0]
    assert torch.allclose(a, b[-3:], atol=1e-5)
    assert torch.allclose(model.score_next(alone)[0], model.score_next(padded)[0], atol=1e-5)


def test_too_long_input_and_missing_negatives_are_data_errors() -> None:
    model = _model()
    with pytest.raises(DataError, match="max_len"):
        model({"user": torch.tensor([0]), "input": torch.zeros(1, MAX_LEN + 1, dtype=torch.long)})
    batch = _batch()
    del batch["neg"]
    with pytest.raises(DataError, match="neg"):
        model.loss(batch, model(batch))
    ssept = _model(**SSEPT)
    with pytest.raises(DataError, match="user"):
        ssept.score_next({"input": batch["input"]})


# ------------------------------------------------------------------------------------------ losses and scores
@pytest.mark.parametrize("loss", ["bce", "ce"])
@pytest.mark.parametrize("config", [SASREC, SSEPT], ids=["sasrec", "sse-pt"])
def test_losses_are_finite_and_decrease(loss, config) -> None:
    model = _model(loss, **config).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    batch = _batch(2, batch_size=8)
    values = []
    for _ in range(25):
        value = model.loss(batch, model(batch))
        assert torch.isfinite(value)
        optimizer.zero_grad()
        value.backward()
        optimizer.step()
        values.append(value.item())
    assert sum(values[-3:]) < 0.8 * sum(values[:3])
    assert torch.count_nonzero(model.item_embedding.weight[PAD]) == 0  # the padding row is never trained


@pytest.mark.parametrize("config", [SASREC, SSEPT], ids=["sasrec", "sse-pt"])
def test_loss_values_by_hand(config) -> None:
    bce, ce = _model("bce", **config).eval(), _model("ce", **config).eval()
    batch = _batch(3)
    states = bce(batch).predictions
    table = bce.item_embedding.weight.detach()  # (num_items + 1, dim), the PAD row zero
    if bce.user_embedding is not None:
        user = bce.user_embedding(batch["user"])  # out(j) = [item_emb(j); user_emb(u)]
        out = torch.cat([table.unsqueeze(0).expand(4, -1, -1), user.unsqueeze(1).expand(-1, ITEMS + 1, -1)], -1)
    else:
        out = table.unsqueeze(0).expand(4, -1, -1)
    scores = torch.einsum("bld,bjd->blj", states, out)  # (B, L, num_items + 1)
    valid = batch["target"] != PAD
    pos = scores.gather(-1, batch["target"].unsqueeze(-1)).squeeze(-1)[valid]
    neg = scores.gather(-1, batch["neg"].unsqueeze(-1)).squeeze(-1)[valid]
    expected = (-F.logsigmoid(pos) - F.logsigmoid(-neg)).mean()
    assert torch.allclose(bce.loss(batch, bce(batch)), expected, atol=1e-5)
    # same weights (same seed): the softmax over all real items, the user term included (it cancels)
    expected_ce = F.cross_entropy(scores[..., :ITEMS][valid], batch["target"][valid])
    assert torch.allclose(ce.loss(batch, ce(batch)), expected_ce, atol=1e-5)
    next_scores = bce.score_next(batch)
    assert next_scores.shape == (4, ITEMS)
    assert torch.allclose(next_scores, scores[:, -1, :ITEMS], atol=1e-5)


def test_score_next_uses_no_dropout_and_no_transforms() -> None:
    torch.manual_seed(0)
    swap_all = _Recorder(lambda ids: (ids + 1) % ITEMS)
    model = SASRec(ITEMS, USERS, MAX_LEN, SASRecConfig(**SSEPT, dropout=0.5), item_transform=swap_all).train()
    batch = {"user": torch.tensor([0, 1]), "input": _batch(4, batch_size=2)["input"]}
    first, second = model.score_next(batch), model.score_next(batch)
    assert torch.equal(first, second) and not first.requires_grad
    assert torch.allclose(first, model.eval().score_next(batch)) and swap_all.calls == []
    assert model.training is False  # score_next leaves the mode alone


# ------------------------------------------------------------------------------------------ index transforms
class _Recorder(nn.Module):
    """An ids -> ids module that records what it is given."""

    def __init__(self, fn=lambda ids: ids) -> None:
        super().__init__()
        self.fn = fn
        self.calls: list[torch.Tensor] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        self.calls.append(ids.clone())
        return self.fn(ids)


@pytest.mark.parametrize("loss", ["bce", "ce"])
def test_transforms_never_see_pad(loss) -> None:
    items, labels, users = _Recorder(lambda i: (i + 1) % ITEMS), _Recorder(lambda i: (i + 2) % ITEMS), _Recorder()
    torch.manual_seed(0)
    model = SASRec(
        ITEMS,
        USERS,
        MAX_LEN,
        SASRecConfig(**SSEPT, loss=loss),
        user_transform=users,
        item_transform=items,
        label_transform=labels,
    ).train()
    batch = _batch(5)
    out = model(batch)
    model.loss(batch, out).backward()
    for recorder, key in ((items, "input"), (labels, "target"), (users, "user")):
        assert len(recorder.calls) == 1, key
        seen = recorder.calls[0]
        assert bool((seen < ITEMS).all()) and seen.numel() == int((batch[key] != PAD).sum())
    valid = batch["input"] != PAD
    assert torch.equal(out.hidden["input_ids"][valid], (batch["input"][valid] + 1) % ITEMS)
    assert bool((out.hidden["input_ids"][~valid] == PAD).all())
    assert torch.equal(
        model.step_targets(batch)[batch["target"] != PAD], (batch["target"][batch["target"] != PAD] + 2) % ITEMS
    )
    model.eval()
    model.loss(batch, model(batch))
    assert len(items.calls) == len(labels.calls) == len(users.calls) == 1  # identity in eval: not even called


def test_a_label_transform_changes_the_targets_the_loss_uses() -> None:
    to_zero = _Recorder(lambda ids: torch.zeros_like(ids))
    plain, swapped = _model("ce"), _model("ce")
    swapped.label_transform = to_zero
    batch = _batch(6)
    zero_targets = {**batch, "target": torch.where(batch["target"] == PAD, PAD, 0)}
    torch.manual_seed(1)
    expected = plain.loss(zero_targets, plain(zero_targets))
    torch.manual_seed(1)
    assert torch.equal(swapped.loss(batch, swapped(batch)), expected)


def test_transforms_are_drawn_once_per_step() -> None:
    torch.manual_seed(0)
    model = SASRec(ITEMS, USERS, MAX_LEN, SASRecConfig(**SASREC), item_transform=SSE(ITEMS, 0.5, seed=0)).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = _batch(7)
    first = model(batch)
    again = model(batch)
    assert torch.equal(first.hidden["input_ids"], again.hidden["input_ids"])
    model.loss(batch, first).backward()
    optimizer.step()
    assert not torch.equal(model(batch).hidden["input_ids"], first.hidden["input_ids"])


@pytest.mark.parametrize("loss", ["bce", "ce"])
@pytest.mark.parametrize("config", [SASREC, SSEPT], ids=["sasrec", "sse-pt"])
def test_sse_at_p_zero_reproduces_plain_sasrec_exactly(loss, config) -> None:
    def train(transforms: dict[str, nn.Module]) -> list[torch.Tensor]:
        torch.manual_seed(0)
        model = SASRec(ITEMS, USERS, MAX_LEN, SASRecConfig(**config, loss=loss), **transforms).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        losses = []
        for step in range(4):
            batch = _batch(10 + step)
            torch.manual_seed(100 + step)  # the dropout masks
            value = model.loss(batch, model(batch))
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
            losses.append(value.detach())
        return losses

    sse = {"item_transform": SSE(ITEMS, 0.0, seed=1), "label_transform": SSE(ITEMS, 0.0, seed=2)}
    if config.get("user_dim"):
        sse["user_transform"] = SSE(USERS, 0.0, seed=3)
    plain = train({})
    assert all(torch.equal(a, b) for a, b in zip(plain, train(sse)))
    noisy = {key: SSE(transform.num_embeddings, 0.5, seed=4) for key, transform in sse.items()}
    assert not all(torch.equal(a, b) for a, b in zip(plain, train(noisy)))

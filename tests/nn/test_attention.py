"""Attention blocks: shapes, padding masks, fully masked rows, gradients, eval/train, hand-computed formulas."""

from __future__ import annotations

import doctest
import math

import pytest
import torch

import embreg.nn.attention as attention_package
from embreg.errors import EmbregError
from embreg.nn.attention import (
    AdditiveAttention,
    KeyValueAttention,
    MultiplicativeAttention,
    ScaledDotProductAttention,
    _masking,
    additive,
    additive_attention,
    key_value,
    key_value_attention,
    masked_softmax,
    multiplicative,
    multiplicative_attention,
    scaled_dot_product,
    scaled_dot_product_attention,
    update_coverage,
)

B, LQ, LK, D = 3, 4, 5, 6
MASK = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)  # row 2: all padding


def _cross_modules() -> list[torch.nn.Module]:
    return [
        AdditiveAttention(D, D, 7),
        AdditiveAttention(D, D, 7, coverage=True),
        MultiplicativeAttention(D, D),
        MultiplicativeAttention(D, D, score="dot"),
        ScaledDotProductAttention(),
    ]


@pytest.mark.parametrize("module", _cross_modules(), ids=lambda m: type(m).__name__)
def test_cross_attention_shapes_masks_and_gradients(module: torch.nn.Module) -> None:
    torch.manual_seed(0)
    query = torch.randn(B, LQ, D, requires_grad=True)
    keys = torch.randn(B, LK, D, requires_grad=True)
    values = torch.randn(B, LK, 2, requires_grad=True)
    extra = {"coverage": torch.rand(B, LK)} if getattr(module, "w_coverage", None) is not None else {}
    context, weights = module(query, keys, values, mask=MASK, **extra)
    assert context.shape == (B, LQ, 2) and weights.shape == (B, LQ, LK)
    assert torch.all(weights[0, :, 3:] == 0)  # padding never receives weight
    assert torch.allclose(weights[:2].sum(-1), torch.ones(2, LQ))
    assert torch.all(weights[2] == 0) and torch.all(context[2] == 0)  # fully masked row: zeros, not NaN
    (context.sum() + weights.pow(2).sum()).backward()
    for name, param in module.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    for tensor in (query, keys, values):
        assert tensor.grad is not None and torch.isfinite(tensor.grad).all()
    assert torch.all(keys.grad[0, 3:] == 0)  # nothing flows back from padding positions


@pytest.mark.parametrize("module", _cross_modules(), ids=lambda m: type(m).__name__)
def test_a_decoder_step_query_and_eval_mode(module: torch.nn.Module) -> None:
    torch.manual_seed(1)
    query, keys = torch.randn(B, D), torch.randn(B, LK, D)
    context, weights = module(query, keys, mask=MASK)
    assert context.shape == (B, D) and weights.shape == (B, LK)
    full, full_weights = module(query.unsqueeze(1), keys, mask=MASK)
    assert torch.equal(context, full.squeeze(1)) and torch.equal(weights, full_weights.squeeze(1))
    module.eval()
    again, _ = module(query, keys, mask=MASK)
    assert torch.equal(context, again)  # no stochastic part: eval equals train


def test_additive_attention_equals_its_formula_by_hand() -> None:
    torch.manual_seed(2)
    h, s = torch.randn(2, 3), torch.randn(2, 4, 5)
    w1, w2, v, wc = torch.randn(6, 3), torch.randn(6, 5), torch.randn(6), torch.randn(6)
    cov = torch.rand(2, 4)
    context, weights = additive_attention(h, s, s, w1, w2, v, coverage=cov, w_coverage=wc)
    for b in range(2):
        scores = torch.stack([v @ torch.tanh(w1 @ h[b] + w2 @ s[b, j] + wc * cov[b, j]) for j in range(4)])
        a = torch.softmax(scores, 0)
        assert torch.allclose(weights[b], a, atol=1e-6)
        assert torch.allclose(context[b], (a[:, None] * s[b]).sum(0), atol=1e-6)


def test_additive_concatenated_form_equals_the_split_form() -> None:
    """The document's ``v^T tanh(W_a [h; s])`` is the split form with ``W_a = [W_1, W_2]``."""
    torch.manual_seed(3)
    h, s, wa, v = torch.randn(1, 3), torch.randn(1, 4, 5), torch.randn(6, 8), torch.randn(6)
    _, weights = additive_attention(h, s, s, wa[:, :3], wa[:, 3:], v)
    scores = torch.stack([v @ torch.tanh(wa @ torch.cat([h[0], s[0, j]])) for j in range(4)])
    assert torch.allclose(weights[0], torch.softmax(scores, 0), atol=1e-6)


def test_coverage_accumulates_and_changes_the_weights() -> None:
    torch.manual_seed(4)
    attn = AdditiveAttention(3, 3, 5, coverage=True)
    keys, query = torch.randn(1, 4, 3), torch.randn(1, 3)
    coverage = None
    steps = []
    for _ in range(3):
        _, weights = attn(query, keys, coverage=coverage)
        steps.append(weights)
        coverage = update_coverage(coverage, weights)
    assert torch.allclose(coverage, sum(steps))  # c_i = sum of the past attention distributions
    assert torch.equal(steps[0], attn(query, keys, coverage=torch.zeros(1, 4))[1])  # first step: zero coverage
    assert not torch.allclose(steps[0], steps[1])
    with pytest.raises(EmbregError, match="coverage=False"):
        AdditiveAttention(3, 3, 5)(query, keys, coverage=coverage)
    with pytest.raises(EmbregError, match="coverage has shape"):
        attn(query, keys, coverage=torch.zeros(1, 3))


def test_multiplicative_scores_by_hand() -> None:
    torch.manual_seed(5)
    h, s, w = torch.randn(2, 3), torch.randn(2, 4, 5), torch.randn(3, 5)
    _, general = multiplicative_attention(h, s, s, w)
    _, dot = multiplicative_attention(s[:, 0], s, s)
    for b in range(2):
        assert torch.allclose(general[b], torch.softmax(torch.stack([h[b] @ w @ s[b, j] for j in range(4)]), 0))
        assert torch.allclose(dot[b], torch.softmax(s[b] @ s[b, 0], 0))
    with pytest.raises(EmbregError, match="dot score needs query_dim == key_dim"):
        MultiplicativeAttention(3, 5, score="dot")
    with pytest.raises(EmbregError, match="score='cosine' is not one of"):
        MultiplicativeAttention(3, 5, score="cosine")  # type: ignore[arg-type]


def test_scaled_dot_product_by_hand_and_against_torch() -> None:
    torch.manual_seed(6)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    context, weights = scaled_dot_product_attention(q, k, v)
    assert torch.allclose(weights, torch.softmax(q @ k.transpose(1, 2) / math.sqrt(4), -1))
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(context, reference, atol=1e-6)
    mask = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 0]], dtype=torch.bool)
    masked, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, :])
    assert torch.allclose(masked, reference, atol=1e-6)


def test_key_value_attention_by_hand_with_its_window() -> None:
    torch.manual_seed(7)
    keys, values = torch.randn(2, 6, 3), torch.randn(2, 6, 4)
    w1, w2, v = torch.randn(5, 3), torch.randn(5, 3), torch.randn(5)
    window = 3
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.bool)
    context, weights = key_value_attention(keys, values, w1, w2, v, window, mask=mask)
    assert context.shape == (2, 6, 4) and weights.shape == (2, 6, window)
    for b in range(2):
        for i in range(6):
            previous = [j for j in range(i - window, i) if j >= 0 and mask[b, j]]
            if not previous:
                assert torch.all(weights[b, i] == 0) and torch.all(context[b, i] == 0)
                continue
            scores = torch.stack([v @ torch.tanh(w1 @ keys[b, j] + w2 @ keys[b, i]) for j in previous])
            a = torch.softmax(scores, 0)
            slots = [j - (i - window) for j in previous]
            assert torch.allclose(weights[b, i, slots], a, atol=1e-6)
            assert torch.allclose(weights[b, i].sum(), torch.tensor(1.0))
            assert torch.allclose(context[b, i], (a[:, None] * values[b, previous]).sum(0), atol=1e-6)


def test_key_value_module_splits_hidden_and_reaches_every_parameter() -> None:
    torch.manual_seed(8)
    attn = KeyValueAttention(key_dim=3, value_dim=4, attn_dim=5, window=2)
    hidden = torch.randn(2, 6, 7, requires_grad=True)
    context, weights = attn(hidden, mask=torch.tensor([[1] * 6, [1, 1, 1, 0, 0, 0]], dtype=torch.bool))
    keys, values = attn.split(hidden)
    assert torch.equal(keys, hidden[..., :3]) and torch.equal(values, hidden[..., 3:])
    assert torch.all(weights[1, 4:, :][weights[1, 4:, :] != 0] > 0)
    assert weights[1, 5, 0] == 0  # position 3 is padding for position 5
    (context.sum() + weights.pow(2).sum()).backward()
    for name, param in attn.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    attn.eval()
    assert torch.equal(attn(hidden)[0], attn(hidden)[0])
    with pytest.raises(EmbregError, match=r"expected \(B, T, 7\)"):
        attn(torch.randn(2, 6, 8))
    with pytest.raises(EmbregError, match="window=0 must be an integer >= 1"):
        KeyValueAttention(3, 4, 5, 0)


def test_masked_softmax_on_a_fully_masked_row_passes_no_nan_gradient() -> None:
    scores = torch.randn(2, 3, requires_grad=True)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    weights = masked_softmax(scores, mask)
    weights.sum().backward()
    assert torch.all(weights[1] == 0) and torch.isfinite(scores.grad).all()


def test_bad_shapes_get_clear_errors() -> None:
    with pytest.raises(EmbregError, match=r"mask has shape \(3, 4\)"):
        scaled_dot_product_attention(torch.randn(3, 2, 4), torch.randn(3, 5, 4), torch.randn(3, 5, 4), mask=MASK[:, :4])
    with pytest.raises(EmbregError, match="query must be"):
        multiplicative_attention(torch.randn(4), torch.randn(1, 5, 4), torch.randn(1, 5, 4))
    with pytest.raises(EmbregError, match="the query's width 3 must equal the keys' width 4"):
        scaled_dot_product_attention(torch.randn(2, 3), torch.randn(2, 5, 4), torch.randn(2, 5, 4))
    with pytest.raises(EmbregError, match="keys .* and values .* must be"):
        additive_attention(
            torch.randn(2, 3),
            torch.randn(2, 5, 4),
            torch.randn(2, 4, 4),
            torch.randn(6, 3),
            torch.randn(6, 4),
            torch.randn(6),
        )


@pytest.mark.parametrize(
    "module", [attention_package, _masking, additive, key_value, multiplicative, scaled_dot_product], ids=str
)
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module, extraglobs={"torch": torch}, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

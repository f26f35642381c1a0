"""Self-attentive sentence embedding: the formula per sentence, masks, the Frobenius penalty, gradients, bad input."""

from __future__ import annotations

import pytest
import torch

from embreg.errors import EmbregError
from embreg.nn.attention.self_attentive import SelfAttentiveEmbedding, attention_penalty, self_attentive_weights


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(3, 6, 5, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]])
    return hidden, mask


def test_weights_equal_the_formula_on_each_sentence_alone() -> None:
    hidden, mask = _batch()
    g = torch.Generator().manual_seed(1)
    w1, w2 = torch.randn(4, 5, generator=g, dtype=torch.float64), torch.randn(3, 4, generator=g, dtype=torch.float64)
    weights = self_attentive_weights(hidden, w1, w2, mask)
    for b, length in enumerate(mask.sum(dim=1).tolist()):
        h = hidden[b, :length]  # (T_b, D): the sentence without its padding
        expected = torch.softmax(w2 @ torch.tanh(w1 @ h.T), dim=1)  # A = softmax(W_s2 tanh(W_s1 H^T))
        torch.testing.assert_close(weights[b, :, :length], expected)
        assert torch.equal(weights[b, :, length:], torch.zeros(3, 6 - length, dtype=torch.float64))


def test_padding_never_receives_weight_and_its_content_does_not_matter() -> None:
    torch.manual_seed(0)
    block = SelfAttentiveEmbedding(dim=5, attn_dim=4, hops=3).double()
    hidden, mask = _batch()
    changed = hidden.clone()
    changed[mask == 0] = 1e3
    embedding, weights = block(hidden, mask)
    embedding2, weights2 = block(changed, mask)
    assert weights.masked_select((mask == 0).unsqueeze(1)).abs().sum() == 0
    torch.testing.assert_close(embedding, embedding2)
    torch.testing.assert_close(weights, weights2)
    torch.testing.assert_close(embedding, weights @ hidden)  # M = A H


def test_penalty_equals_its_formula() -> None:
    g = torch.Generator().manual_seed(2)
    weights = torch.softmax(torch.randn(4, 3, 7, generator=g, dtype=torch.float64), dim=-1)
    expected = torch.stack(
        [torch.linalg.matrix_norm(a @ a.T - torch.eye(3, dtype=torch.float64), ord="fro") ** 2 for a in weights]
    )
    torch.testing.assert_close(attention_penalty(weights), expected)
    one_hot = torch.eye(3, 7, dtype=torch.float64).unsqueeze(0)  # distinct one-hot hops: no redundancy
    assert attention_penalty(one_hot).item() == 0.0
    same = torch.zeros(1, 2, 4)
    same[0, :, 0] = 1.0  # both hops on one position: A A^T = [[1, 1], [1, 1]], minus I leaves 2 ones
    assert attention_penalty(same).item() == 2.0


def test_gradients_reach_every_parameter() -> None:
    torch.manual_seed(0)
    block = SelfAttentiveEmbedding(dim=5, attn_dim=4, hops=3)
    hidden, mask = _batch()
    embedding, weights = block(hidden.float(), mask)
    (embedding.sum() + attention_penalty(weights).sum()).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in block.parameters())


def test_bad_input_is_named() -> None:
    hidden, mask = _batch()
    block = SelfAttentiveEmbedding(dim=5, attn_dim=4, hops=2).double()
    with pytest.raises(EmbregError, match="a mask row is all padding"):
        block(hidden, torch.zeros_like(mask))
    with pytest.raises(EmbregError, match="mask shape"):
        block(hidden, mask[:, :4])
    with pytest.raises(EmbregError, match="do not fit"):
        SelfAttentiveEmbedding(dim=4, attn_dim=4, hops=2).double()(hidden)
    with pytest.raises(EmbregError, match="hops=0 must be an int >= 1"):
        SelfAttentiveEmbedding(dim=4, hops=0)
    with pytest.raises(EmbregError, match=r"weights must be \(B, r, T\)"):
        attention_penalty(torch.ones(2, 2))

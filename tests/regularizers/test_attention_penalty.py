"""The registered self-attention penalty: coefficient x batch mean of ||A A^T - I||_F^2; refused without attention."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.models.bilstm_attention import BiLSTMAttention
from embreg.recipes import load_recipe
from embreg.registry import REGISTRY
from embreg.regularizers.base import StepContext


def test_the_registered_penalty_equals_its_formula_on_the_bilstm() -> None:
    torch.manual_seed(0)
    model = BiLSTMAttention(nn.Embedding(20, 6), 2, hidden_dim=4, attn_dim=3, hops=3, mlp_dim=5)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    batch = {"input_ids": torch.randint(1, 20, (2, 5)) * mask, "attention_mask": mask, "labels": torch.tensor([0, 1])}
    output = model(batch)
    entry = REGISTRY.get("regularizer", "attention-penalty")
    penalty = entry.build(entry.config(coefficient=0.3), None).penalty(StepContext(model, batch, output=output))
    a = output.hidden["attention"]
    expected = 0.3 * sum(((m @ m.T - torch.eye(3)) ** 2).sum() for m in a) / 2
    torch.testing.assert_close(penalty, expected)
    penalty.backward()
    assert model.attention.w_s1.weight.grad is not None and model.lstm.weight_ih_l0.grad is not None


def test_a_model_without_attention_matrices_refuses_it() -> None:
    with pytest.raises(ConfigError, match="needs attention_matrix, which model 'text-cnn' does not provide"):
        load_recipe("cls-cnn-reviews", ["regularizers=[{name: attention-penalty}]"])
    with pytest.raises(ConfigError, match=r"attention-penalty.coefficient=-1.0 is outside \[0, inf\)"):
        load_recipe("cls-bilstm-attn-reviews", ["regularizers=[{name: attention-penalty, coefficient: -1}]"])
    entry = REGISTRY.get("regularizer", "attention-penalty")
    ctx = StepContext(nn.Identity(), {}, output=None)
    with pytest.raises(ConfigError, match=r"needs output.hidden\['attention'\]"):
        entry.build(entry.config(), None).penalty(ctx)

"""Noise attenuation (lnsr-noise-stability-bert.txt, Fig. 1) on models whose answer is known."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from embreg.analysis.noise_attenuation import noise_attenuation, plot_attenuation, save_attenuation
from embreg.errors import ConfigError
from tests.helpers.finetune_tiny import LinearStackModel, one_thread, tiny_batch, tiny_classifier  # noqa: F401 (one_thread: autouse)


def test_curves_start_at_the_ratio_and_follow_linear_layers_exactly() -> None:
    # layer 1 halves every vector, layer 2 is the identity: relative changes are scale-free, so they stay at 5%
    model = LinearStackModel([0.5 * torch.eye(4), torch.eye(4)])
    curves = noise_attenuation(model, {"x": torch.randn(6, 4)}, ratio=0.05)
    assert sorted(curves) == [0, 1, 2]
    for i, values in curves.items():
        assert len(values) == 3 - i
        torch.testing.assert_close(torch.tensor(values), torch.full((3 - i,), 0.05))


def test_a_projection_attenuates_the_noise() -> None:
    projection = torch.diag(torch.tensor([1.0, 0.0, 0.0, 0.0]))  # keeps 1 of 4 directions
    model = LinearStackModel([torch.eye(4), projection])
    x = torch.zeros(200, 4)
    x[:, 0] = 1.0
    curves = noise_attenuation(model, {"x": x}, ratio=0.05, repeats=3)
    assert curves[1][0] == pytest.approx(0.05, rel=1e-4)
    assert 0.01 < curves[1][1] < 0.04  # about 0.05 / 2 of the noise survives the projection


def test_bert_curves_have_one_value_per_later_layer_and_plot(tmp_path: Path) -> None:
    model = tiny_classifier(dropout=0.1).train()
    curves = noise_attenuation(model, tiny_batch(), ratio=0.05, seed=1)
    assert model.training  # restored afterwards
    assert [len(curves[i]) for i in range(4)] == [4, 3, 2, 1]
    assert all(v == pytest.approx(0.05, rel=1e-4) for v in (c[0] for c in curves.values()))
    assert noise_attenuation(model, tiny_batch(), seed=1) == curves  # seeded
    plot_attenuation({"pretrained": curves, "fine-tuned": curves}, tmp_path / "a.png", title="t")
    save_attenuation({"pretrained": curves}, tmp_path / "a.json", ratio=0.05)
    assert (tmp_path / "a.png").stat().st_size > 1000 and "pretrained" in (tmp_path / "a.json").read_text()


def test_bad_input() -> None:
    with pytest.raises(ConfigError, match="ratio=0 must be > 0"):
        noise_attenuation(tiny_classifier(), tiny_batch(), ratio=0)
    with pytest.raises(ConfigError, match="has no layer stack"):
        noise_attenuation(nn.Linear(2, 2), {})

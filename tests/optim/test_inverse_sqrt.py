"""The Transformer's schedule: linear warm-up to the peak, then lr * sqrt(W / step); Adam 0.9/0.98/1e-9; the step
counter travels with the optimizer's state; the train section refuses what the schedule cannot honour."""

from __future__ import annotations

import math

import pytest
import torch

from embreg.errors import ConfigError
from embreg.optim.inverse_sqrt import InverseSqrtAdam, inverse_sqrt_adam_factory, inverse_sqrt_factor
from embreg.recipes import load_recipe


def test_the_factor_is_vaswanis_curve_scaled_to_peak_at_the_end_of_warm_up() -> None:
    warmup, d_model = 40, 512
    for step in range(1, 200):
        paper = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        peak = d_model**-0.5 * warmup**-0.5
        assert inverse_sqrt_factor(step - 1, warmup) == pytest.approx(paper / peak, rel=1e-12)
    assert inverse_sqrt_factor(warmup - 1, warmup) == 1.0


def test_the_optimizer_follows_the_schedule_and_resumes_it_from_its_state() -> None:
    param = torch.nn.Parameter(torch.zeros(2))
    opt = InverseSqrtAdam([param], lr=0.5, warmup_steps=3)
    assert opt.defaults["betas"] == (0.9, 0.98) and opt.defaults["eps"] == 1e-9
    seen = []
    for _ in range(6):
        param.grad = torch.ones(2)
        opt.step()
        seen.append(opt.param_groups[0]["lr"])
    assert seen == pytest.approx(
        [0.5 / 3, 1.0 / 3, 0.5, 0.5 * math.sqrt(3 / 4), 0.5 * math.sqrt(3 / 5), 0.5 * math.sqrt(0.5)]
    )
    again = InverseSqrtAdam([torch.nn.Parameter(torch.zeros(2))], lr=0.5, warmup_steps=3)
    again.load_state_dict(opt.state_dict())
    again.param_groups[0]["params"][0].grad = torch.ones(2)
    again.step()
    assert again.param_groups[0]["lr"] == pytest.approx(0.5 * math.sqrt(3 / 7))
    assert inverse_sqrt_adam_factory(0.1, total_steps=50, warmup=0.1)([param]).warmup_steps == 5


def test_the_train_section_refuses_what_the_schedule_cannot_honour() -> None:
    with pytest.raises(ConfigError, match="train.schedule='inverse-sqrt' needs train.warmup"):
        load_recipe("mf", ["train.schedule=inverse-sqrt"])
    with pytest.raises(ConfigError, match="inverse-sqrt runs with train.optimizer=adam"):
        load_recipe("mf", ["train.schedule=inverse-sqrt", "train.warmup=0.1", "train.optimizer=sgd"])
    assert load_recipe("mf", ["train.schedule=inverse-sqrt", "train.warmup=0.1"]).train.schedule == "inverse-sqrt"

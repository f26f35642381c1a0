"""Distillation (Hinton et al. 2015) as an objective: the loss equals its formula, alpha=0 is plain training bit
for bit, and it is refused outside classification, without teachers or with teachers of other data."""

from __future__ import annotations

import math

import pytest
import torch

from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run, run_single
from embreg.regularizers.distillation import Distillation, distillation_loss, teacher_probabilities
from tests.helpers.pretrained_stub import tiny_pretrained
from tests.helpers.recipes import base_recipe


def test_the_loss_equals_its_formula() -> None:
    torch.manual_seed(0)
    student, teachers = torch.randn(4, 3), [torch.randn(4, 3), torch.randn(4, 3)]
    hard, temperature, alpha = torch.tensor(0.7), 3.0, 0.4
    loss = distillation_loss(
        student, teacher_probabilities(teachers, temperature), hard, temperature=temperature, alpha=alpha
    )
    expected = 0.0
    for row in range(4):
        p = [
            sum(
                math.exp(t[row, c] / temperature) / sum(math.exp(t[row, k] / temperature) for k in range(3))
                for t in teachers
            )
            / 2
            for c in range(3)
        ]
        q = [
            math.exp(student[row, c] / temperature) / sum(math.exp(student[row, k] / temperature) for k in range(3))
            for c in range(3)
        ]
        expected += sum(p[c] * (math.log(p[c]) - math.log(q[c])) for c in range(3)) / 4
    assert float(loss) == pytest.approx(alpha * temperature**2 * expected + (1 - alpha) * 0.7, rel=1e-5)


def test_a_student_equal_to_its_teacher_pays_no_soft_loss() -> None:
    logits = torch.randn(5, 4)
    soft = teacher_probabilities([logits], 2.0)
    assert float(distillation_loss(logits, soft, torch.tensor(0.0), temperature=2.0, alpha=1.0)) == pytest.approx(
        0, abs=1e-6
    )


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="at least one teacher"):
        Distillation([], temperature=1.0, alpha=0.5)
    with pytest.raises(ConfigError, match="temperature=0"):
        Distillation([torch.nn.Linear(1, 1)], temperature=0, alpha=0.5)
    with pytest.raises(ConfigError, match=r"alpha=1.5 must be in \[0, 1\]"):
        load_recipe(base_recipe("encoder-classifier"), ["objective={name: distill, alpha: 1.5}"])


def test_distillation_is_refused_outside_classification() -> None:
    with pytest.raises(ConfigError, match="objective 'distill' serves the classification task only, not task 'rating'"):
        load_recipe("mf", ["objective={name: distill, teachers: [runs/x]}"])


# ------------------------------------------------------------------------------------------- through a recipe
@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory):
    yield from tiny_pretrained(tmp_path_factory)


def _overrides(*extra: str) -> list[str]:
    smoke = load_recipe(base_recipe("encoder-classifier")).adapter.smoke_overrides
    return [*smoke, "train.device=cpu", "train.epochs=2", *extra]


@pytest.fixture(scope="module")
def teacher(stub, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("teacher")
    run_single(
        load_recipe(base_recipe("encoder-classifier"), _overrides("train.keep_checkpoints=best", "train.seed=7")), out
    )
    return out


def _trained_weights(overrides: list[str]) -> dict[str, torch.Tensor]:
    built = build_run(load_recipe(base_recipe("encoder-classifier"), overrides))
    trainer = built.trainer(None)
    trainer.fit()
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}


def test_alpha_zero_is_plain_training_bit_for_bit(teacher) -> None:
    plain = _trained_weights(_overrides())
    distilled = _trained_weights(_overrides(f"objective={{name: distill, teachers: [{teacher}], alpha: 0.0}}"))
    assert plain.keys() == distilled.keys()
    assert all(torch.equal(plain[k], distilled[k]) for k in plain)
    soft = _trained_weights(_overrides(f"objective={{name: distill, teachers: [{teacher}], alpha: 0.5}}"))
    assert not all(torch.equal(plain[k], soft[k]) for k in plain)


def test_teachers_must_be_named_and_trained_on_the_students_data(teacher) -> None:
    with pytest.raises(ConfigError, match="needs its teachers"):
        build_run(load_recipe(base_recipe("encoder-classifier"), _overrides("objective={name: distill}")))
    other = _overrides(f"objective={{name: distill, teachers: [{teacher}]}}", "data.max_length=12")
    with pytest.raises(ConfigError, match="trained on other data or tokenisation"):
        build_run(load_recipe(base_recipe("encoder-classifier"), other))

"""Layer stacks: rerunning an encoder from layer b reproduces its states; dropout replay; clear errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.models import ModelOutput
from embreg.models.hidden_states import hidden_states_dict
from embreg.regularizers import DropoutReplay, HFEncoderStack, SequentialStack, layer_stack
from tests.helpers.finetune_tiny import tiny_batch, tiny_classifier, tiny_hf_classifier


@pytest.mark.parametrize("start", [1, 2, 3])
def test_rerun_from_layer_b_reproduces_the_clean_states_and_predictions(start: int) -> None:
    model = tiny_classifier().eval()
    batch = tiny_batch()
    output = model(batch)
    stack = layer_stack(model)
    assert isinstance(stack, HFEncoderStack) and stack.num_layers == 3
    states = stack.clean_states(output)
    rerun = stack.run(states[start - 1], batch, start)
    for got, want in zip(rerun, states[start:]):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(stack.predict(rerun[-1], batch), output.predictions)


def test_hugging_face_sequence_classifier_has_a_stack_with_its_own_head() -> None:
    model = tiny_hf_classifier().eval()
    batch = tiny_batch()
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True)
    stack = layer_stack(model)
    states = stack.clean_states(ModelOutput(out.logits, hidden_states_dict(out.hidden_states)))
    rerun = stack.run(states[0], batch, 1)
    torch.testing.assert_close(rerun[-1], states[-1])
    torch.testing.assert_close(stack.predict(rerun[-1], batch), out.logits)


def test_dropout_replay_gives_identical_masks_and_leaves_the_stream_alone() -> None:
    model = tiny_classifier(dropout=0.3).train()
    batch = tiny_batch()
    stack = layer_stack(model)
    replay = DropoutReplay()
    replay.attach(stack.layer(2))
    states = stack.clean_states(model(batch))
    after_clean = torch.get_rng_state()
    with replay.replaying(states[1]):
        again = stack.run(states[1], batch, 2)
    assert torch.equal(torch.get_rng_state(), after_clean)
    for got, want in zip(again, states[2:]):
        assert torch.equal(got, want)
    fresh = stack.run(states[1], batch, 2)
    assert not torch.equal(fresh[-1], states[-1])


def test_replay_without_a_training_pass_is_an_error() -> None:
    replay = DropoutReplay()
    replay.attach(nn.Linear(2, 2))
    with pytest.raises(ConfigError, match="no saved state"), replay.replaying():
        pass


def test_sequential_stack_runs_and_checks_its_range() -> None:
    stack = SequentialStack([nn.Identity(), nn.Linear(2, 2, bias=False)], head=lambda h: h.sum(-1))
    outputs = stack.run(torch.ones(3, 2), {}, start=2)
    assert len(outputs) == 1 and outputs[0].shape == (3, 2)
    assert stack.predict(outputs[0], {}).shape == (3,)
    with pytest.raises(ConfigError, match=r"start=3 is outside the model's layer range \[1, 2\]"):
        stack.run(torch.ones(1, 2), {}, start=3)
    with pytest.raises(ConfigError, match="at least one layer"):
        SequentialStack([])


def test_missing_hidden_states_and_models_without_layers_are_named() -> None:
    stack = layer_stack(tiny_classifier())
    with pytest.raises(ConfigError, match="has no hidden state 'hidden_states.0'"):
        stack.clean_states(ModelOutput(torch.zeros(2, 2)))
    with pytest.raises(ConfigError, match="Sequential has no layer stack"):
        layer_stack(nn.Sequential(nn.Linear(2, 2)))

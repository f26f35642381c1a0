"""A well-formed checkpoint that does not fit the model (missing key, wrong shape) is a one-line error naming the key,
when a resume loads ``last.safetensors`` and when it loads ``best.safetensors``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from embreg.cli import main
from embreg.errors import DataError
from embreg.runs.checkpoint import load_checkpoint, save_checkpoint
from embreg.runs.state_checks import check_model_state, check_optimizer_state
from embreg.train.trainer import BEST_CHECKPOINT, LAST_CHECKPOINT
from tests.helpers.trainers import tiny_mf_trainer

QUICK = ["data.max_rows=2000", "train.epochs=1", "train.progress=false", "train.threads=1"]


def _trainer(data, run_dir: Path, epochs: int = 2):
    return tiny_mf_trainer(data, run_dir, epochs=epochs)


def _edit(path: Path, change) -> None:
    """Rewrites a checkpoint with ``change(state)`` applied: well formed, with a valid checksum."""
    state = load_checkpoint(path)
    change(state)
    save_checkpoint(path, state)


def _model_key(state: dict) -> str:
    return next(key for key in state["model"] if key.endswith("weight"))


def _drop_key(state: dict) -> None:
    del state["model"][_model_key(state)]


def _reshape_key(state: dict) -> None:
    key = _model_key(state)
    state["model"][key] = torch.zeros(state["model"][key].shape[0] + 1, state["model"][key].shape[1])


@pytest.fixture
def trained(tmp_path, synthetic_ratings) -> Path:
    run_dir = tmp_path / "run"
    _trainer(synthetic_ratings, run_dir, epochs=1).fit()
    return run_dir


@pytest.mark.parametrize("checkpoint", [LAST_CHECKPOINT, BEST_CHECKPOINT])
@pytest.mark.parametrize(
    "change, message",
    [(_drop_key, r"it lacks the model key '[\w.]+weight'"), (_reshape_key, r"its model key '[\w.]+weight' has shape")],
)
def test_resume_refuses_a_model_key_that_does_not_fit(trained, synthetic_ratings, checkpoint, change, message):
    _edit(trained / checkpoint, change)
    with pytest.raises(DataError, match=re.escape(checkpoint) + "' does not fit the model: " + message) as info:
        _trainer(synthetic_ratings, trained).fit(resume=True)
    assert "\n" not in str(info.value)


def test_resume_refuses_a_missing_entry_of_the_training_state(trained, synthetic_ratings):
    _edit(trained / LAST_CHECKPOINT, lambda state: state.pop("optimizer"))
    with pytest.raises(DataError, match=r"last\.safetensors' lacks the entry 'optimizer' of the training state"):
        _trainer(synthetic_ratings, trained).fit(resume=True)


def test_resume_refuses_optimizer_state_of_another_shape(trained, synthetic_ratings):
    def reshape(state: dict) -> None:
        entries = next(iter(state["optimizer"]["state"].values()))
        entries["exp_avg"] = torch.zeros(7, 7)

    _edit(trained / LAST_CHECKPOINT, reshape)
    with pytest.raises(DataError, match=r"does not fit the optimizer: its optimizer state 'exp_avg' of '[\w.]+' has"):
        _trainer(synthetic_ratings, trained).fit(resume=True)


def test_resume_of_a_fitting_checkpoint_still_works(trained, synthetic_ratings):
    first = _trainer(synthetic_ratings, trained.parent / "again", epochs=2).fit()
    _trainer(synthetic_ratings, trained, epochs=2).fit(resume=True)  # one more epoch from the saved state
    assert (trained / LAST_CHECKPOINT).exists() and first.metrics["epochs_run"] == 2


def test_checks_name_unexpected_keys_and_group_sizes():
    model = torch.nn.Linear(2, 3)
    with pytest.raises(DataError, match=r"its model key 'extra' is not one of the model's"):
        check_model_state({**model.state_dict(), "extra": torch.zeros(1)}, model, "'c'")
    optimizer = torch.optim.Adam(model.parameters())
    saved = {"state": {}, "param_groups": [{"params": [0]}]}
    with pytest.raises(DataError, match=r"its parameter group 0 has 1 parameters, the optimizer's 2"):
        check_optimizer_state(saved, optimizer, model, "'c'")


@pytest.mark.parametrize("checkpoint", [LAST_CHECKPOINT, BEST_CHECKPOINT])
def test_cli_resume_with_a_checkpoint_that_does_not_fit_is_one_line(tmp_path, capsys, checkpoint):
    out = tmp_path / "run"
    sets = [x for s in QUICK for x in ("--set", s)]
    assert main(["run", "mf", *sets, "--out", str(out)]) == 0
    (out / "metrics.json").unlink()  # as if the run had been interrupted before it finished
    _edit(out / checkpoint, _drop_key)
    capsys.readouterr()
    assert main(["run", "mf", *sets, "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embreg: error: checkpoint ") and err.count("\n") == 1, err
    assert f"{checkpoint}' does not fit the model: it lacks the model key" in err

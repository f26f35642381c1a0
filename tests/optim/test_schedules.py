"""train.schedule: torch's schedulers by name, their settings refused where unread, and exact resume."""

from __future__ import annotations

import math

import pytest
import torch

from embreg.errors import ConfigError
from embreg.optim.schedules import SCHEDULES, cycle_end_epochs, scheduler_factory
from embreg.recipes import load_recipe
from embreg.recipes.resume_check import epochs_change_problem
from embreg.recipes.run import build_run, run_single
from embreg.runs.run_dir import RunDirectory

QUICK = ["data.max_rows=2000", "train.progress=false", "train.device=cpu", "train.patience=null"]


def _lrs(name: str, settings: dict, epochs: int = 4, per_epoch: int = 5, lr: float = 1.0) -> list[float]:
    """The learning rate of every step (before it), under ``name``, with ``per_epoch`` steps per epoch."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    make = scheduler_factory(name, epochs=epochs, settings=settings)
    scheduler = make(opt, per_epoch) if make is not None else None
    lrs = []
    for _ in range(epochs * per_epoch):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if scheduler is not None:
            scheduler.step()
    return lrs


def test_cosine_anneals_from_lr_to_min_lr_over_the_run() -> None:
    lrs = _lrs("cosine", {"min_lr": 0.1})
    assert lrs[0] == 1.0
    assert lrs[-1] == pytest.approx(0.1 + 0.9 * (1 + math.cos(math.pi * 19 / 20)) / 2)
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))


def test_cosine_warm_up_rises_linearly_then_anneals() -> None:
    lrs = _lrs("cosine", {"warmup": 0.2})  # 4 of 20 steps
    assert lrs[:5] == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0])
    assert lrs[5] < 1.0


def test_warm_restarts_restart_at_epoch_boundaries_with_growing_cycles() -> None:
    lrs = _lrs("cosine-restarts", {"restart_epochs": 1, "restart_mult": 2}, epochs=7)
    restarts = [i for i, lr in enumerate(lrs) if lr == 1.0]
    assert restarts == [0, 5, 15]  # cycles of 1 and 2 epochs (5 steps each), then one of 4
    assert cycle_end_epochs(1, 2, 7) == [0, 2, 6]


def test_step_and_exponential_decay_per_epoch() -> None:
    step = _lrs("step", {"step_epochs": 2, "gamma": 0.5})
    assert [step[e * 5] for e in range(4)] == [1.0, 1.0, 0.5, 0.5]
    exponential = _lrs("exponential", {"gamma": 0.5})
    assert [exponential[e * 5] for e in range(4)] == pytest.approx([1.0, 0.5, 0.25, 0.125])


def test_one_cycle_peaks_at_lr_after_its_warm_up() -> None:
    lrs = _lrs("one-cycle", {"warmup": 0.25})
    assert max(lrs) == pytest.approx(1.0)
    assert lrs.index(max(lrs)) == 4  # pct_start 0.25 of 20 steps
    assert lrs[0] < 0.1 and lrs[-1] < 0.01


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (
            ["train.schedule=cosine", "train.restart_epochs=2"],
            "restart_epochs=2 .* read by train.schedule="
            "cosine-restarts only, and train.schedule='cosine' would ignore it",
        ),
        (["train.gamma=0.5"], "train.gamma=0.5 .* train.schedule='constant' would ignore it"),
        (
            ["train.schedule=step", "train.step_epochs=1", "train.warmup=0.1"],
            "train.warmup=0.1 .* train.schedule='step' would",
        ),
        (["train.schedule=cosine-restarts"], "needs train.restart_epochs"),
        (["train.schedule=exponential"], "needs train.gamma"),
        (["train.schedule=step", "train.step_epochs=1", "train.gamma=2"], r"train.gamma=2.0 must be in \(0, 1\]"),
        (["train.schedule=cosinus"], "not a schedule; choose one of constant, linear, cosine"),
        (["train.snapshot_ensemble=true"], "train.schedule='constant' has no cycles"),
        (
            [
                "train.schedule=cosine-restarts",
                "train.restart_epochs=3",
                "train.epochs=5",
                "train.snapshot_ensemble=true",
            ],
            "at least two cosine cycles",
        ),
        (["train.average_checkpoints=9", "train.epochs=3"], r"average_checkpoints=9 must be in \[1, train.epochs=3\]"),
    ],
)
def test_settings_a_schedule_does_not_read_are_refused(overrides: list[str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_recipe("mf", overrides)


def test_the_schedule_table_names_every_choice() -> None:
    assert set(SCHEDULES) >= {"constant", "linear", "cosine", "cosine-restarts", "step", "exponential", "one-cycle"}


def test_fixed_length_schedules_refuse_more_epochs_on_resume() -> None:
    assert "cosine" in str(
        epochs_change_problem(
            {"train": {"epochs": 2, "schedule": "cosine"}}, {"train": {"epochs": 3, "schedule": "cosine"}}
        )
    )
    restarts = {"schedule": "cosine-restarts", "restart_epochs": 1}
    assert epochs_change_problem({"train": {"epochs": 2, **restarts}}, {"train": {"epochs": 3, **restarts}}) is None


def test_a_resumed_run_follows_the_uninterrupted_schedule_exactly(tmp_path) -> None:
    schedule = ["train.schedule=cosine-restarts", "train.restart_epochs=2", "train.restart_mult=2", "train.lr=0.01"]
    whole = run_single(load_recipe("mf", [*QUICK, *schedule, "train.epochs=4"]), tmp_path / "whole")
    part = tmp_path / "part"
    run_single(load_recipe("mf", [*QUICK, *schedule, "train.epochs=2"]), part)
    state = RunDirectory(part).load_checkpoint("last")
    assert state is not None and state["scheduler"]["last_epoch"] > 0  # the scheduler's state was saved
    resumed = run_single(load_recipe("mf", [*QUICK, *schedule, "train.epochs=4"]), part, resume=True)
    assert [r["train_loss"] for r in resumed.history] == [r["train_loss"] for r in whole.history]
    a = RunDirectory(tmp_path / "whole").load_checkpoint("last")
    b = RunDirectory(part).load_checkpoint("last")
    assert a is not None and b is not None
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["scheduler"] == b["scheduler"]
    assert a["optimizer"]["param_groups"][0]["lr"] == b["optimizer"]["param_groups"][0]["lr"]


def test_the_trainer_steps_the_scheduler_after_every_step() -> None:
    recipe = load_recipe(
        "mf", [*QUICK, "train.epochs=2", "train.schedule=step", "train.step_epochs=1", "train.gamma=0.5"]
    )
    lrs: list[float] = []
    built = build_run(recipe)
    trainer = built.trainer(None, step_callbacks=[lambda t, record: lrs.append(record["lr"])])
    trainer.fit()
    per_epoch = len(trainer.batches)
    # the loggers see the rate each step used: train.lr for the first epoch, half of it for the second
    assert lrs[:per_epoch] == [recipe.train.lr] * per_epoch
    assert lrs[per_epoch:] == pytest.approx([recipe.train.lr * 0.5] * per_epoch)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda s: s.pop("scheduler"), "it holds no scheduler state"),
        (lambda s: s["scheduler"].update(T_0="ten"), "T_0 holds 'ten', not a finite number"),
        (lambda s: s["scheduler"].pop("T_mult"), r"its state lacks \['T_mult'\]"),
    ],
)
def test_a_checkpoint_whose_scheduler_state_does_not_fit_is_refused_before_loading(tmp_path, edit, match) -> None:
    from embreg.errors import DataError
    from embreg.runs.checkpoint import save_checkpoint

    schedule = ["train.schedule=cosine-restarts", "train.restart_epochs=1"]
    run_single(load_recipe("mf", [*QUICK, *schedule, "train.epochs=1"]), tmp_path)
    files = RunDirectory(tmp_path)
    state = files.load_checkpoint("last")
    assert state is not None
    edit(state)
    save_checkpoint(files.file("last.safetensors"), state)
    with pytest.raises(DataError, match=f"does not fit the learning-rate schedule: {match}"):
        run_single(load_recipe("mf", [*QUICK, *schedule, "train.epochs=2"]), tmp_path, resume=True)

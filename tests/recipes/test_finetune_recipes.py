"""Fine-tuning recipes: strict loading, the shipped comparison set, and `embreg run --seeds` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from embreg.cli import main
from embreg.errors import ConfigError
from embreg.recipes import list_recipes, load_recipe

COMPARISON = {
    "ft-reviews": None,
    "ft-reviews-noise": "layer-noise",
    "ft-reviews-lnsr": "lnsr",
    "ft-reviews-l2sp": "l2sp",
    "ft-reviews-mixout": "mixout",
    "ft-reviews-smart": "smart",
    "ft-reviews-r3f": "r3f",
}
FINETUNE_TASKS = {"classification", "regression"}


def test_the_comparison_recipes_ship_and_differ_only_in_the_regulariser() -> None:
    shipped = list_recipes()
    base = load_recipe("ft-reviews")
    for name, regularizer in COMPARISON.items():
        assert name in shipped and shipped[name]
        cfg = load_recipe(name)
        assert cfg.task in FINETUNE_TASKS and cfg.model.name == "encoder-classifier"
        assert [spec.name for spec in cfg.regularizers] == ([] if regularizer is None else [regularizer]), name
        assert (cfg.task, cfg.data, cfg.model, cfg.train, cfg.objective, cfg.embeddings, cfg.index_transforms) == (
            base.task,
            base.data,
            base.model,
            base.train,
            base.objective,
            base.embeddings,
            base.index_transforms,
        ), name
    assert load_recipe("mf").task not in FINETUNE_TASKS
    assert load_recipe("ft-polarity").data.dataset == "polarity"
    lnsr = load_recipe("ft-reviews-lnsr").regularizers[0]
    assert (lnsr.sigma, lnsr.start_layer, lnsr.weights) == (0.2, 3, 1.0)


def test_finetuning_trains_with_adamw_and_a_linear_schedule() -> None:
    train = load_recipe("ft-reviews").train
    assert (train.optimizer, train.schedule, train.warmup) == ("adamw", "linear", 0.1)


@pytest.mark.parametrize(
    "override, match",
    [
        (
            "regularizers.0.sigmaa=0.1",
            r"unknown config key 'regularizers\[0\].sigmaa'; did you mean "
            r"'regularizers\[0\].sigma'",
        ),
        ("regularizers.0.name=lnrs", "unknown regularizer 'lnrs'; did you mean 'lnsr'"),
        ("data.task=regression", "data.task='regression' needs task: regression"),
        ("train.warmup=1.5", r"train.warmup=1.5 is outside \[0, 1\)"),
        ("model.pooling=max", "model.pooling"),
        ("model={name: lstm-lm}", "model 'lstm-lm' does not serve task 'classification'"),
    ],
)
def test_bad_recipes_are_config_errors(override: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_recipe("ft-reviews-lnsr", [override])


def test_out_of_range_regularizer_argument_is_refused_when_loading() -> None:
    with pytest.raises(ConfigError, match=r"sigma=-1(\.0)? is outside \[0, inf\)"):
        load_recipe("ft-reviews-lnsr", ["regularizers.0.sigma=-1"])


def test_linear_schedule_needs_adamw() -> None:
    from embreg.recipes.context import BuildContext
    from embreg.recipes.run import BuiltRun

    recipe = load_recipe("ft-reviews", ["train.optimizer=adam"])
    built = BuiltRun(recipe, None, torch.nn.Linear(1, 1), None, [], [None], None, BuildContext(recipe, None, 0))
    with pytest.raises(ConfigError, match="train.schedule='linear' runs with train.optimizer='adamw'"):
        built.trainer(None)


def test_monitor_follows_the_task() -> None:
    assert load_recipe("ft-reviews").monitor == ("val_mcc", "max")
    assert load_recipe("ft-reviews", ["data.task=rating"]).monitor == ("val_accuracy", "max")
    assert load_recipe("ft-reviews", ["data.task=regression", "task=regression"]).monitor == ("val_corr", "max")
    with pytest.raises(ConfigError, match="task: regression needs data.task='regression'"):
        load_recipe("ft-reviews", ["task=regression"])


@pytest.mark.integration
def test_run_seeds_writes_summary_and_resume_adds_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture, restore_threads: None
) -> None:
    pytest.importorskip("transformers")
    from tests.helpers.finetune_tiny import tiny_checkpoint

    checkpoint = tiny_checkpoint(tmp_path / "ckpt")
    out = tmp_path / "runs"
    args = [
        "run",
        "ft-polarity",
        "--out",
        str(out),
        "--set",
        f"model.pretrained={checkpoint}",
        "--set",
        "train.epochs=1",
        "--set",
        "regularizers=[{name: lnsr}]",
        "--set",
        "train.batch_size=32",
    ]
    assert main([*args, "--seeds", "2"]) == 0
    first = json.loads((out / "summary.json").read_text())
    assert first["test_accuracy"]["n"] == 2 and "gap_accuracy" in first and "seconds_per_step" in first
    metrics = json.loads((out / "seed-0" / "metrics.json").read_text())
    assert metrics["gap_accuracy"] == pytest.approx(metrics["train_accuracy"] - metrics["test_accuracy"])
    assert not (out / "seed-0" / "last.safetensors").exists()  # checkpoints are dropped once a seed is finished
    assert "lnsr" in (out / "seed-0" / "report.md").read_text()
    stamp = (out / "seed-0" / "metrics.json").stat().st_mtime_ns
    assert main([*args, "--seeds", "3", "--resume"]) == 0
    assert (out / "seed-0" / "metrics.json").stat().st_mtime_ns == stamp  # finished seeds are not rerun
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["test_accuracy"]["n"] == 3
        and summary["test_accuracy"]["values"][:2] == first["test_accuracy"]["values"]
    )
    assert "median" in capsys.readouterr().out

"""Fine-tuning recipes: strict loading, the shipped comparison set, and `embreg run --seeds` end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from embreg.cli import main
from embreg.errors import ConfigError
from embreg.recipes import list_recipes
from embreg.recipes.finetune_run import is_finetune_recipe, load_finetune_recipe

sys.path.insert(0, str(Path(__file__).parents[1] / "regularizers"))
from _finetune_tiny import tiny_checkpoint, one_thread  # noqa: F401, E402 (one_thread: autouse)

COMPARISON = {"ft-reviews": "none", "ft-reviews-noise": "noise", "ft-reviews-lnsr": "lnsr", "ft-reviews-l2sp": "l2sp",
              "ft-reviews-mixout": "mixout", "ft-reviews-smart": "smart", "ft-reviews-r3f": "r3f"}


def test_the_comparison_recipes_ship_and_differ_only_in_the_regulariser() -> None:
    shipped = list_recipes()
    base = load_finetune_recipe("ft-reviews")
    for name, regularizer in COMPARISON.items():
        assert name in shipped and shipped[name] and is_finetune_recipe(name)
        cfg = load_finetune_recipe(name)
        assert cfg.regularizer.name == regularizer
        assert (cfg.regularizer.build() is None) == (regularizer == "none")
        assert (cfg.data, cfg.model, cfg.train) == (base.data, base.model, base.train), name
    assert not is_finetune_recipe("mf") and load_finetune_recipe("ft-polarity").data.dataset == "polarity"


@pytest.mark.parametrize("override, match", [
    ("regularizer.args.sigmaa=0.1", "unknown argument regularizer.args.sigmaa for 'lnsr'; did you mean 'sigma'"),
    ("regularizer.args.sigma=-1", r"sigma=-1 is outside \[0, inf\)"),
    ("regularizer.name=lnrs", "unknown regularizer 'lnrs'; did you mean 'lnsr'"),
    ("data.task=regression", "does not match data.task='regression'"),
    ("train.warmup=1.5", r"train.warmup=1.5 is outside \[0, 1\)"),
])
def test_bad_recipes_are_config_errors(override: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_finetune_recipe("ft-reviews-lnsr", [override])


def test_monitor_follows_the_task() -> None:
    assert load_finetune_recipe("ft-reviews").monitor == ("val_mcc", "max")
    assert load_finetune_recipe("ft-reviews", ["data.task=rating"]).monitor == ("val_accuracy", "max")
    assert load_finetune_recipe("ft-reviews", ["data.task=regression", "task=regression"]).monitor == ("val_corr", "max")


@pytest.mark.integration
def test_run_seeds_writes_summary_and_resume_adds_seeds(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    checkpoint = tiny_checkpoint(tmp_path / "ckpt")
    out = tmp_path / "runs"
    args = ["run", "ft-polarity", "--out", str(out), "--set", f"model.pretrained={checkpoint}", "--set",
            "train.epochs=1", "--set", "regularizer.name=lnsr", "--set", "train.batch_size=32"]
    assert main([*args, "--seeds", "2"]) == 0
    first = json.loads((out / "summary.json").read_text())
    assert first["test_accuracy"]["n"] == 2 and "gap_accuracy" in first and "seconds_per_step" in first
    metrics = json.loads((out / "seed-0" / "metrics.json").read_text())
    assert metrics["gap_accuracy"] == pytest.approx(metrics["train_accuracy"] - metrics["test_accuracy"])
    assert not (out / "seed-0" / "last.safetensors").exists()  # checkpoints are dropped once a seed is finished
    stamp = (out / "seed-0" / "metrics.json").stat().st_mtime_ns
    assert main([*args, "--seeds", "3", "--resume"]) == 0
    assert (out / "seed-0" / "metrics.json").stat().st_mtime_ns == stamp  # finished seeds are not rerun
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test_accuracy"]["n"] == 3 and summary["test_accuracy"]["values"][:2] == \
        first["test_accuracy"]["values"]
    assert "median" in capsys.readouterr().out

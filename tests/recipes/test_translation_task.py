"""Task ``translation`` end to end on a small pairs file: it learns, SSE at p = 0 is the plain run bit for bit, a
resumed run equals an uninterrupted one, and ``embreg translate`` reads a file or stdin."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch

from embreg.cli import main
from embreg.errors import ConfigError
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run, run_single
from embreg.tasks.translation.evaluation import TranslationEvaluator
from tests.helpers.recipes import set_args
from tests.helpers.translation import quick_overrides, write_pairs


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pairs(tmp_path_factory.mktemp("pairs") / "pairs.tsv")


def _weights_after_steps(overrides: list[str], steps: int = 4) -> dict[str, torch.Tensor]:
    built = build_run(load_recipe("translation", overrides))
    trainer = built.trainer(None)
    trainer.model.train()
    batches = iter(built.batches.epoch(0))
    for _ in range(steps):
        trainer._train_step(next(batches), 0)
    return {k: v.detach().clone() for k, v in trainer.model.named_parameters()}


def test_sse_at_zero_probability_is_the_plain_run_bit_for_bit(pairs_file: Path) -> None:
    base = quick_overrides(pairs_file)
    plain = _weights_after_steps(base)
    zero = _weights_after_steps(
        base + ["index_transforms={source: {name: sse-se, p: 0.0}, target: {name: sse-se, p: 0.0}}"]
    )
    swapped = _weights_after_steps(
        base + ["index_transforms={source: {name: sse-se, p: 0.3}, target: {name: sse-se, p: 0.3}}"]
    )
    assert plain.keys() == zero.keys() and all(torch.equal(plain[k], zero[k]) for k in plain)
    assert any(not torch.equal(plain[k], swapped[k]) for k in plain)


def test_a_resumed_run_equals_an_uninterrupted_one(pairs_file: Path, tmp_path: Path, monkeypatch) -> None:
    overrides = quick_overrides(pairs_file, epochs=3) + [
        "index_transforms={source: {name: sse-se, p: 0.05}, target: {name: sse-se, p: 0.05}}"
    ]
    evaluate = TranslationEvaluator.__call__
    calls = {"valid": 0}

    def counted(self, model, split):
        if split == "valid":
            calls["valid"] += 1
            if calls["valid"] == 2 and calls.get("interrupt"):
                raise KeyboardInterrupt  # killed while evaluating the second epoch: the first's checkpoint is kept
        return evaluate(self, model, split)

    monkeypatch.setattr(TranslationEvaluator, "__call__", counted)
    full = run_single(load_recipe("translation", overrides), tmp_path / "full").metrics
    uninterrupted_calls = calls["valid"]
    calls.update(valid=0, interrupt=1)
    with pytest.raises(KeyboardInterrupt):
        run_single(load_recipe("translation", overrides), tmp_path / "part")
    calls.update(valid=0, interrupt=0)
    resumed = run_single(load_recipe("translation", overrides), tmp_path / "part", resume=True).metrics
    assert calls["valid"] == uninterrupted_calls - 1  # the resumed run evaluated epochs 2 and 3 only
    for key in ("val_bleu", "val_loss", "test_loss", "test_bleu", "test_chrf", "best_epoch", "epochs_run"):
        assert resumed[key] == full[key], key


def test_a_run_learns_the_pairs_and_translate_reads_a_file_or_stdin(
    pairs_file: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    run_dir = tmp_path / "run"
    overrides = quick_overrides(pairs_file, epochs=12) + ["train.lr=0.005", "train.batch_size=8"]
    assert main(["run", "translation", "--out", str(run_dir), *set_args(overrides)]) == 0
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["test_bleu"] > 5 and metrics["test_chrf"] > 25, metrics  # an untrained model scores 0
    assert {"test_bleu_greedy", "test_bleu_coverage", "test_decode_seconds"} <= set(metrics)
    split = json.loads((run_dir / "split.json").read_text())
    assert split["data"]["path"] == str(pairs_file) and sum(split["pairs"].values()) == 240
    long = load_recipe("translation", [*overrides, "data.min_words=3"])
    kept = long.adapter.prepare(long)
    assert kept.record["pairs_with_min_words"] == sum(kept.record["pairs"].values()) < 240
    assert all(len(s.split()) >= 3 for s in kept.references["test"])
    assert set(json.loads((run_dir / "tokenizers.json").read_text())) == {"source", "target"}
    lines = tmp_path / "in.txt"
    lines.write_text("w1 w2\n\nw3\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["translate", str(run_dir), "--input", str(lines), "--beam", "3", "--beta", "0.2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[1] == "" and out[0].startswith("t")
    assert main(["translate", str(run_dir), "--input", str(lines), "--beam", "1"]) == 0
    greedy = capsys.readouterr().out.splitlines()
    monkeypatch.setattr("sys.stdin", io.StringIO("w1 w2\n\nw3\n"))
    assert main(["translate", str(run_dir), "--beam", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == greedy
    assert main(["translate", str(run_dir), "--input", str(tmp_path / "missing.txt")]) == 2


def test_settings_the_task_cannot_honour_are_refused(pairs_file: Path) -> None:
    with pytest.raises(ConfigError, match="needs one vocabulary for both sides; set data.joint_vocab=true"):
        load_recipe(
            "translation", quick_overrides(pairs_file) + ["data.joint_vocab=false", "model.share_embeddings=true"]
        )
    with pytest.raises(ConfigError, match="data.max_tokens=300 makes sequences of 302 tokens"):
        load_recipe("translation", quick_overrides(pairs_file) + ["data.max_tokens=300"])
    with pytest.raises(ConfigError, match="train.schedule=inverse-sqrt runs with train.optimizer=adam"):
        load_recipe("translation", quick_overrides(pairs_file) + ["train.optimizer=sgd"])
    with pytest.raises(ConfigError, match="index_transforms.source: .*'source' ids"):
        load_recipe("mf", ["index_transforms={source: {name: sse-se}}"])
    with pytest.raises(ConfigError, match="does not take 'md'"):
        load_recipe("translation", quick_overrides(pairs_file) + ["embeddings={name: md}"])


def test_batch_tokens_sorts_batches_by_length_and_null_draws_them_at_random(pairs_file: Path) -> None:
    from embreg.batching.batches import TensorBatches
    from embreg.batching.token_batches import TokenBudgetBatches

    sorted_run = build_run(load_recipe("translation", quick_overrides(pairs_file) + ["data.batch_tokens=64"]))
    assert isinstance(sorted_run.batches, TokenBudgetBatches)
    for batch in sorted_run.batches.epoch(0):
        rows, width = batch["source"].shape[0], max(batch["source"].shape[1], batch["target"].shape[1])
        assert rows <= 32 and (rows * width <= 64 or rows == 1)  # train.batch_size=32 caps the rows
    random_run = build_run(load_recipe("translation", quick_overrides(pairs_file) + ["data.batch_tokens=null"]))
    assert isinstance(random_run.batches, TensorBatches)
    with pytest.raises(ConfigError, match="data.batch_tokens=0 must be >= 1 or null"):
        load_recipe("translation", quick_overrides(pairs_file) + ["data.batch_tokens=0"])

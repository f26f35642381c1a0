"""Task ``mlm``: held-out texts, p = 0 bit for bit, resume, fine-tuning from an ``mlm`` run, refused checkpoints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from embreg.cli import main  # noqa: E402
from embreg.errors import ConfigError, DataError  # noqa: E402
from embreg.recipes import list_recipes, load_recipe  # noqa: E402
from embreg.recipes.run import build_run, run_single  # noqa: E402
from embreg.runs.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from embreg.tasks.mlm.task import MaskedLMDataConfig, pretraining_texts  # noqa: E402
from embreg.tasks.text.task import load_text_task  # noqa: E402
from tests.helpers.finetune_tiny import tiny_checkpoint  # noqa: E402

SMALL = [
    "data.max_texts=48",
    "data.valid_size=16",
    "data.test_size=16",
    "data.max_length=24",
    "train.batch_size=16",
    "train.eval_batch_size=16",
    "train.progress=false",
    "train.device=cpu",
    "train.threads=1",
]
FT_SMALL = [
    "data.train_size=16",
    "data.max_length=16",
    "train.batch_size=8",
    "train.epochs=1",
    "train.progress=false",
    "train.threads=1",
]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random BERT with a word-level tokenizer that has [MASK] (a real local checkpoint, loaded offline)."""
    return Path(tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "bert", mask=True))


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    out = tmp_path_factory.mktemp("mlm") / "run"
    run_single(load_recipe("mlm-sse", [*SMALL, f"model.pretrained={tiny_bert}"]), out)
    return out


def _models(run_dir: Path, which: str = "best") -> dict[str, torch.Tensor]:
    return load_checkpoint(run_dir / f"{which}.safetensors")["model"]


def test_pretraining_reviews_avoid_every_fine_tuning_evaluation_text() -> None:
    splits, record = pretraining_texts(MaskedLMDataConfig())
    pretraining = {t for texts in splits.values() for t in texts}
    assert record["fine_tuning_holdout"] >= 3000 and len(pretraining) > 18_000
    checked = 0
    for name in list_recipes():
        recipe = load_recipe(name)
        if recipe.task in ("classification", "regression") and recipe.data.dataset == "reviews":
            task = load_text_task(load_recipe(name, ["data.train_size=10"]))
            for split in ("valid", "test"):
                assert pretraining.isdisjoint(task.texts[split]), (name, split)
            checked += 1
    default = load_recipe("ft-reviews", ["data.train_size=10", "data.valid_size=null", "data.test_size=null"])
    assert pretraining.isdisjoint(load_text_task(default).texts["test"])
    assert checked >= 7


def test_p_zero_reproduces_the_plain_run_bit_for_bit(tiny_bert: Path, tmp_path: Path) -> None:
    plain = run_single(load_recipe("mlm", [*SMALL, f"model.pretrained={tiny_bert}"]), tmp_path / "plain")
    zero = load_recipe(
        "mlm-sse",
        [*SMALL, f"model.pretrained={tiny_bert}", "index_transforms.token.p=0", "index_transforms.label.p=0"],
    )
    swapped = run_single(zero, tmp_path / "zero")
    for key in ("val_loss", "test_loss", "implicit_sse_rate"):
        assert plain.metrics[key] == swapped.metrics[key]
    a, b = _models(tmp_path / "plain"), _models(tmp_path / "zero")
    assert set(b) - set(a) == {"token_transform._extra_state", "label_transform._extra_state"}  # their seeds
    assert all(torch.equal(a[k], b[k]) for k in a)
    with_sse = run_single(load_recipe("mlm-sse", [*SMALL, f"model.pretrained={tiny_bert}"]), None)
    assert with_sse.metrics["val_loss"] != plain.metrics["val_loss"]


def test_held_out_masked_accuracy_is_reported_beside_perplexity(mlm_run: Path) -> None:
    metrics = json.loads((mlm_run / "metrics.json").read_text())
    history = [json.loads(line) for line in (mlm_run / "history.jsonl").read_text().splitlines()]
    assert 0 <= metrics["val_accuracy"] <= 1 and 0 <= metrics["test_accuracy"] <= 1
    assert "val_accuracy" in history[0] and "| test_accuracy |" in (mlm_run / "report.md").read_text()


def test_training_batches_are_grouped_by_length_unless_switched_off(tiny_bert: Path) -> None:
    from embreg.batching.length_grouped_batches import LengthGroupedBatches

    def longest(group: bool) -> list[int]:
        overrides = [*SMALL, "data.max_length=128", "train.batch_size=8", f"data.group_by_length={group}"]
        recipe = load_recipe("mlm", [*overrides, f"model.pretrained={tiny_bert}"])
        batches = build_run(recipe).batches
        assert isinstance(batches, LengthGroupedBatches) == group
        return sorted(int(b["attention_mask"].sum(dim=1).max()) for b in batches.epoch(0))

    grouped, drawn = longest(True), longest(False)
    assert sum(grouped) < sum(drawn)  # batches of similar lengths: the shorter ones are cut shorter


def test_resume_equals_the_uninterrupted_run(tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from embreg.train.trainer import Trainer

    recipe = load_recipe(
        "mlm-sse", [*SMALL, f"model.pretrained={tiny_bert}", "train.epochs=2", "train.keep_checkpoints=all"]
    )
    whole = run_single(recipe, tmp_path / "whole")
    step = Trainer._step_on_device

    def interrupted(self: Trainer, batch: dict, epoch: int) -> object:
        if epoch == 1:
            raise KeyboardInterrupt  # after epoch 0's last.safetensors, before any step of epoch 1
        return step(self, batch, epoch)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "_step_on_device", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_single(recipe, tmp_path / "split")
    resumed = run_single(recipe, tmp_path / "split", resume=True)
    assert [r["train_loss"] for r in resumed.history] == [r["train_loss"] for r in whole.history]
    assert resumed.metrics["test_loss"] == whole.metrics["test_loss"]
    a, b = _models(tmp_path / "whole", "last"), _models(tmp_path / "split", "last")
    assert a.keys() == b.keys()
    for key in a:  # the weights, and the SSE generators' states (the transforms' extra state)
        if isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]), key
        else:
            assert torch.equal(a[key]["generator_state"], b[key]["generator_state"]), key


def test_an_mlm_run_directory_is_the_encoder_of_a_fine_tuning_recipe(mlm_run: Path, tmp_path: Path) -> None:
    recipe = load_recipe("ft-reviews-sse", [*FT_SMALL, f"model.pretrained={mlm_run}"])
    model = build_run(recipe).model
    saved = _models(mlm_run)
    encoder = model.encoder.state_dict()
    assert encoder.keys() == {k.removeprefix("encoder.") for k in saved if k.startswith("encoder.")}
    assert all(torch.equal(encoder[k], saved[f"encoder.{k}"]) for k in encoder)
    assert main(["run", "ft-reviews", "--out", str(tmp_path / "ft"), "--set", f"model.pretrained={mlm_run}",
                 *[x for s in FT_SMALL for x in ("--set", s)]]) == 0  # fmt: skip
    report = (tmp_path / "ft" / "report.md").read_text()
    assert f"encoder: mlm run '{mlm_run.resolve()}' (best.safetensors of epoch 0" in report
    assert "encoder" not in json.loads((tmp_path / "ft" / "split.json").read_text())["data"]  # the data's record


def test_a_wrong_architecture_checkpoint_is_refused(mlm_run: Path, tmp_path: Path) -> None:
    crafted = tmp_path / "crafted"
    crafted.mkdir()
    for name in ("config.yaml", "run.json", "metrics.json"):  # a finished run whose checkpoint does not fit
        (crafted / name).write_text((mlm_run / name).read_text())
    state = load_checkpoint(mlm_run / "best.safetensors")
    key = "encoder.embeddings.word_embeddings.weight"
    state["model"][key] = state["model"][key][:, :4].contiguous()
    save_checkpoint(crafted / "best.safetensors", state)
    with pytest.raises(DataError, match=r"word_embeddings.weight' has shape \[15, 4\], the model's has \[15, 8\]"):
        build_run(load_recipe("ft-reviews", [*FT_SMALL, f"model.pretrained={crafted}"]))


def test_runs_of_other_tasks_and_runs_without_a_best_checkpoint_are_refused(mlm_run: Path, tmp_path: Path) -> None:
    other = tmp_path / "rating"
    other.mkdir()
    (other / "config.yaml").write_text("task: rating\nmodel: {name: mf}\n")
    with pytest.raises(DataError, match="is a 'rating' run directory; model.pretrained takes an 'mlm' run directory"):
        build_run(load_recipe("ft-reviews", [*FT_SMALL, f"model.pretrained={other}"]))
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.yaml").write_text((mlm_run / "config.yaml").read_text())
    with pytest.raises(DataError, match=r"has no best.safetensors \(run it with train.keep_checkpoints=best or all\)"):
        build_run(load_recipe("ft-reviews", [*FT_SMALL, f"model.pretrained={bare}"]))


def test_an_unfinished_or_failed_mlm_run_is_refused_as_an_encoder(mlm_run: Path, tmp_path: Path) -> None:
    for status, error, expected in (
        ("training", None, r"is unfinished \(still training, or stopped before its end\)"),
        ("failed", "loss is not finite", r"failed \(loss is not finite\)"),
    ):
        copy = tmp_path / status
        shutil.copytree(mlm_run, copy)
        record = json.loads((copy / "run.json").read_text())
        record.update(status=status, error=error)
        (copy / "run.json").write_text(json.dumps(record))
        with pytest.raises(DataError, match=rf"model.pretrained: the mlm run {copy} {expected}; it takes a finished"):
            build_run(load_recipe("ft-reviews", [*FT_SMALL, f"model.pretrained={copy}"]))
    build_run(load_recipe("ft-reviews", [*FT_SMALL, f"model.pretrained={mlm_run}"]))  # the finished run itself


def test_a_users_text_file_with_a_bad_line_is_named(tiny_bert: Path, tmp_path: Path) -> None:
    path = tmp_path / "texts.txt"
    path.write_bytes(b"a good dress\n\nthe film is bad\n\xff\xfe broken\n")
    with pytest.raises(DataError, match=r"texts.txt, line 4: not UTF-8 text"):
        run_single(load_recipe("mlm", [*SMALL, f"model.pretrained={tiny_bert}", f"data.path={path}"]), None)


def test_sse_on_text_tasks_leaves_the_tokenizers_special_ids_alone(tiny_bert: Path) -> None:
    from transformers import AutoTokenizer

    specials = tuple(sorted(AutoTokenizer.from_pretrained(tiny_bert).all_special_ids))
    assert len(specials) == 5  # [PAD] [UNK] [CLS] [SEP] [MASK]
    mlm = build_run(load_recipe("mlm-sse", [*SMALL, f"model.pretrained={tiny_bert}"])).model
    assert mlm.token_transform.excluded.ids == specials and mlm.label_transform.excluded.ids == specials
    ft = build_run(load_recipe("ft-reviews-sse", [*FT_SMALL, f"model.pretrained={tiny_bert}"])).model
    assert ft.token_transform.excluded.ids == specials


def test_settings_the_data_does_not_read_are_refused() -> None:
    with pytest.raises(ConfigError, match="data.max_articles=3 is read by dataset 'enwiki-gensim' only"):
        load_recipe("mlm", ["data.max_articles=3"])
    with pytest.raises(ConfigError, match=r"mask_share \+ data.random_share = 1.05 must be <= 1"):
        load_recipe("mlm", ["data.mask_share=0.95"])


@pytest.mark.integration
def test_the_pretrained_minilm_has_a_far_lower_mlm_loss_than_random_weights(tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from embreg.models.pretrained import list_pretrained, pretrained_dir

    if not {i.name: i.cached for i in list_pretrained()}.get("all-minilm-l6-v2"):
        pytest.skip("all-MiniLM-L6-v2 is not cached (embreg data fetch)")
    directory = pretrained_dir("all-minilm-l6-v2")
    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(directory)).save_pretrained(tmp_path / "random")
    AutoTokenizer.from_pretrained(directory).save_pretrained(tmp_path / "random")
    overrides = [
        "data.max_texts=160",
        "data.valid_size=32",
        "data.test_size=32",
        "data.max_length=32",
        "train.batch_size=16",
        "train.lr=2e-4",
        "train.warmup=0",
        "train.progress=false",
        "train.threads=1",
    ]
    losses = {
        name: run_single(load_recipe("mlm", [*overrides, f"model.pretrained={source}"]), None).metrics["test_loss"]
        for name, source in (("pretrained", "all-minilm-l6-v2"), ("random", tmp_path / "random"))
    }
    assert losses["pretrained"] < losses["random"] - 1.5, losses  # measured: 6.45 against 9.37 nats


def test_the_wikipedia_extract_gives_passages_split_by_article() -> None:
    from embreg.data.datasets.mlm_texts import wiki_passages

    config = MaskedLMDataConfig(dataset="enwiki-gensim", max_articles=30, valid_size=20, test_size=20, max_length=64)
    splits, record = pretraining_texts(config)
    assert all(len(text.split()) <= 64 for texts in splits.values() for text in texts)
    assert len(splits["test"]) >= 20 and len(splits["valid"]) >= 20 and splits["train"]
    articles = wiki_passages(64, 30)
    owner = {text: i for i, passages in enumerate(articles) for text in passages}
    used = {split: {owner[t] for t in texts} for split, texts in splits.items()}
    assert used["train"].isdisjoint(used["test"]) and used["train"].isdisjoint(used["valid"])
    assert record["articles"] == len(articles)

"""Continued masked-LM pre-training keeps the MLM head of its ``model.pretrained`` (a Hugging Face masked LM such as
``embreg export`` of an mlm run, or the mlm run directory), so it starts at the loss the exported model had."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from embreg.errors import DataError  # noqa: E402
from embreg.models.pretrained_mlm_head import pretrained_mlm_head  # noqa: E402
from embreg.recipes import load_recipe  # noqa: E402
from embreg.recipes.run import build_run, run_single  # noqa: E402
from embreg.serving import load  # noqa: E402
from embreg.serving.exporting import export  # noqa: E402
from tests.helpers.finetune_tiny import tiny_checkpoint  # noqa: E402

DATA = ["data.max_texts=32", "data.valid_size=16", "data.test_size=16", "data.max_length=24"]
TRAIN = ["train.batch_size=16", "train.progress=false", "train.lr=0.01", "train.epochs=1"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A finished mlm run on a tiny BERT, its Hugging Face export, and the tiny BERT it started from."""
    root = tmp_path_factory.mktemp("mlm-head")
    bert = Path(tiny_checkpoint(root / "bert", mask=True))
    run_single(load_recipe("mlm", [*DATA, *TRAIN, f"model.pretrained={bert}"]), root / "run")
    export(load(root / "run"), root / "hf")
    return root / "run", root / "hf", bert


def _initial_test_loss(pretrained: Path) -> float:
    built = build_run(load_recipe("mlm", [*DATA, *TRAIN, f"model.pretrained={pretrained}"]))
    return built.evaluator(built.model.eval(), "test")["loss"]


@pytest.mark.parametrize("source", ["hf", "run"])
def test_the_continued_model_starts_at_the_exported_models_loss(exported, source: str) -> None:
    run_dir, hf, _ = exported
    trained = load(run_dir)
    expected = trained.evaluator(trained.model, "test")["loss"]
    assert _initial_test_loss(hf if source == "hf" else run_dir) == pytest.approx(expected, abs=1e-6)


def test_the_head_is_read_as_the_export_wrote_it(exported) -> None:
    run_dir, hf, bert = exported
    head = load(run_dir).model.head.state_dict()
    for source in (hf, run_dir):
        weights, _ = pretrained_mlm_head(source)
        assert weights is not None and all(torch.equal(weights[k], head[k]) for k in head)
    assert pretrained_mlm_head(bert) == (None, f"fresh MLM head: {bert} has none")


def test_the_report_names_the_head_a_run_started_from(exported, tmp_path: Path) -> None:
    _, hf, bert = exported
    run_single(load_recipe("mlm", [*DATA, *TRAIN, f"model.pretrained={hf}"]), tmp_path / "continued")
    assert f"MLM head of '{hf.resolve()}' (cls.predictions)" in (tmp_path / "continued" / "report.md").read_text()
    run_single(load_recipe("mlm", [*DATA, *TRAIN, f"model.pretrained={bert}"]), tmp_path / "fresh")
    assert "fresh MLM head" in (tmp_path / "fresh" / "report.md").read_text()


def _save_masked_lm(directory: Path, drop: str | None = None, untie: bool = False) -> Path:
    from safetensors.torch import save_file
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)
    model = BertForMaskedLM(config)
    model.save_pretrained(directory)
    tied = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")  # the same tensors as others
    state = {k: v.clone() for k, v in model.state_dict().items() if k != drop and k not in tied}
    if untie:
        state["cls.predictions.decoder.weight"] = torch.randn(20, 8)
    save_file(state, str(directory / "model.safetensors"))
    return directory


def test_a_partial_head_or_an_untied_decoder_is_refused(tmp_path: Path) -> None:
    whole = pretrained_mlm_head(_save_masked_lm(tmp_path / "whole"))[0]
    assert whole is not None and sorted(whole) == [
        "bias",
        "dense.bias",
        "dense.weight",
        "layer_norm.bias",
        "layer_norm.weight",
    ]
    with pytest.raises(DataError, match=r"its masked-LM head lacks cls.predictions.transform.dense.bias"):
        pretrained_mlm_head(_save_masked_lm(tmp_path / "partial", drop="cls.predictions.transform.dense.bias"))
    with pytest.raises(DataError, match="not tied to the word embeddings"):
        pretrained_mlm_head(_save_masked_lm(tmp_path / "untied", untie=True))


def test_loading_checkpoints_prints_no_bars_or_reports_and_warns_of_missing_encoder_weights(
    exported, tmp_path: Path, capfd
) -> None:
    import warnings

    from safetensors.torch import load_file, save_file
    from transformers.utils import logging

    from embreg.models.pretrained import load_pretrained

    _, hf, bert = exported
    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the export lacks only the pooler, which is no warning
        load_pretrained(hf)
    out, err = capfd.readouterr()
    assert "Loading weights" not in out + err and "LOAD REPORT" not in out + err
    assert logging.is_progress_bar_enabled() and logging.get_verbosity() == logging.WARNING  # restored
    partial = tmp_path / "partial"
    for file in bert.iterdir():
        (partial / file.name).parent.mkdir(exist_ok=True)
        (partial / file.name).write_bytes(file.read_bytes())
    state = load_file(str(partial / "model.safetensors"))
    del state["encoder.layer.1.output.dense.weight"]
    save_file(state, str(partial / "model.safetensors"))
    with pytest.warns(UserWarning, match=r"1 encoder weights are not in the checkpoint .*encoder.layer.1.output"):
        load_pretrained(partial)

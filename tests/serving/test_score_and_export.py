"""score (language-model perplexity per line and in total) and export (Hugging Face and plain safetensors)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
import torch.nn.functional as F

from embreg.errors import ConfigError
from embreg.serving import load
from embreg.serving.exporting import export


def test_line_perplexity_is_the_models_cross_entropy_and_the_total_is_token_weighted(trained) -> None:
    run = load(trained("lm"))
    lines = ["the cat sat on a mat", "", "a big zebra ran"]
    table = run.score(lines)
    assert table["line"].tolist() == ["1", "3", "total"]
    vocab = run.prepared.vocab
    ids = torch.tensor([1, *vocab.encode(["a", "big", "zebra", "ran", "<eos>"]).tolist()])
    output, _ = run.model.forward_sequence(ids[:-1].unsqueeze(0), None)
    loss = F.cross_entropy(output.predictions.reshape(-1, len(vocab)), ids[1:]).item()
    last = table.iloc[1]
    assert last["tokens"] == 5 and last["unknown"] == 1  # "zebra" is not in the vocabulary
    assert last["perplexity"] == pytest.approx(math.exp(loss), rel=1e-5)
    total = table.iloc[-1]
    weighted = (table["loss"][:2] * table["tokens"][:2]).sum() / table["tokens"][:2].sum()
    assert total["tokens"] == 12 and total["loss"] == pytest.approx(weighted)
    assert total["perplexity"] == pytest.approx(math.exp(weighted))
    with pytest.raises(ConfigError, match="score serves"):
        load(trained("rating")).score(["x"])


def test_exported_encoder_gives_the_same_logits_in_transformers(trained, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    run = load(trained("classification"))
    export(run, tmp_path / "hf")
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "hf")).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    texts = run.prepared.task.texts["test"][:8]
    batch = tokenizer(texts, padding=True, truncation=True, max_length=run.recipe.data.max_length, return_tensors="pt")
    with torch.no_grad():
        ours = run.model({k: v for k, v in batch.items()}).predictions
        theirs = hf(**batch).logits
    torch.testing.assert_close(theirs, ours, rtol=1e-5, atol=1e-5)
    assert hf.config.id2label[0] == run.prepared.task.label_names[0]


def test_recommender_export_is_a_plain_state_dict_with_the_ids(trained, tmp_path: Path) -> None:
    run = load(trained("rating"))
    export(run, tmp_path / "mf")
    state = safetensors.torch.load_file(str(tmp_path / "mf" / "model.safetensors"))
    for key, value in run.model.state_dict().items():
        torch.testing.assert_close(state[key], value)
    record = json.loads((tmp_path / "mf" / "embreg_export.json").read_text())
    assert record["task"] == "rating" and record["model"] == "mf"
    assert record["vocabularies"]["user"] == run.vocabularies["user"].labels.tolist()
    assert "007" in record["vocabularies"]["user"]
    with pytest.raises(ConfigError, match="not empty"):
        export(run, tmp_path / "mf")


def test_lm_export_keeps_tied_weights_and_the_words(trained, tmp_path: Path) -> None:
    run = load(trained("lm"))
    export(run, tmp_path / "lm")
    state = safetensors.torch.load_file(str(tmp_path / "lm" / "model.safetensors"))
    assert set(state) == set(run.model.state_dict())
    words = json.loads((tmp_path / "lm" / "embreg_export.json").read_text())["vocabularies"]["token"]
    assert words[:2] == ["<unk>", "<eos>"] and len(words) == len(run.prepared.vocab)
    assert np.isfinite(next(iter(state.values())).numpy()).all()


def test_mean_pooled_encoder_exports_its_encoder_and_head(trained, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    run = load(trained("regression"))  # mean pooling: no AutoModelFor... class pools this way
    export(run, tmp_path / "hf")
    encoder = transformers.AutoModel.from_pretrained(str(tmp_path / "hf")).eval()
    head = safetensors.torch.load_file(str(tmp_path / "hf" / "head.safetensors"))
    note = json.loads((tmp_path / "hf" / "embreg_head.json").read_text())
    assert note["pooling"] == "mean" and "untrained head" in note["logits"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    batch = tokenizer(run.prepared.task.texts["test"][:6], padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = encoder(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        theirs = ((hidden * mask).sum(1) / mask.sum(1)) @ head["weight"].T + head["bias"]
        ours = run.model(dict(batch)).predictions
    torch.testing.assert_close(theirs.squeeze(-1), ours, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["classification", "regression", "mlm"])
def test_a_hugging_face_export_prints_no_bars(trained, tmp_path: Path, capfd, family: str) -> None:
    """``save_pretrained``'s "Writing model shards" bar (carriage returns in a log) is not embreg's to print."""
    from transformers.utils import logging

    from embreg.cli import main

    run_dir = trained(family)
    capfd.readouterr()
    assert main(["export", str(run_dir), "--out", str(tmp_path / "hf")]) == 0
    out, err = capfd.readouterr()
    assert "Writing model shards" not in out + err and "\r" not in out + err
    assert err == "" and out.startswith(f"exported {family} run")
    assert logging.is_progress_bar_enabled()  # the user's own setting is left as it was

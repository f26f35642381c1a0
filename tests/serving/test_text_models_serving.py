"""A trained text CNN / BiLSTM run and a multi-task run load, predict and export."""

from __future__ import annotations

import json

import pytest

from embreg.recipes import load_recipe
from embreg.recipes.run import run_single
from embreg.serving import load
from embreg.serving.exporting import export

TINY = [
    "data.train_size=16",
    "data.valid_size=8",
    "data.test_size=8",
    "data.max_length=16",
    "train.batch_size=8",
    "train.epochs=1",
    "train.progress=false",
    "train.device=cpu",
    "train.keep_checkpoints=best",
]
SMALL_CNN = "model={name: text-cnn, init_embeddings: random, embedding_dim: 8, num_filters: 3}"


@pytest.mark.integration
def test_a_multi_task_run_predicts_and_exports_every_head(tmp_path) -> None:
    run_single(load_recipe("ft-reviews-multitask", [SMALL_CNN, *TINY]), tmp_path / "run")
    run = load(tmp_path / "run")
    table = run.predict(["Lovely dress, fits well", "Awful fabric"]).table
    assert list(table.columns) == [
        "text",
        "label_recommended",
        "probability_recommended",
        "label_rating",
        "probability_rating",
        "status",
    ]
    assert set(table["label_rating"]) <= {"1", "2", "3", "4", "5"}
    assert set(table["label_recommended"]) <= {"recommended", "not recommended"}
    out = export(run, tmp_path / "export")
    record = json.loads((out / "embreg_export.json").read_text())
    assert (out / "model.safetensors").is_file() and sorted(record["vocabularies"]) == [
        "label_rating",
        "label_recommended",
    ]
    # the tokenizer the texts were split with travels with the model
    assert record["model_class"] == "embreg.models.text_cnn.TextCNN" and (out / "tokenizer_config.json").is_file()


@pytest.mark.integration
def test_a_bilstm_run_predicts_class_names(tmp_path) -> None:
    model = (
        "model={name: bilstm-attn, init_embeddings: random, embedding_dim: 8, hidden_dim: 4, attn_dim: 4, hops: 2, "
        "mlp_dim: 4}"
    )
    run_single(load_recipe("cls-bilstm-attn-reviews", [model, *TINY]), tmp_path / "run")
    table = load(tmp_path / "run").predict(["Lovely dress"]).table
    assert table.loc[0, "label"] in {"recommended", "not recommended"} and 0.5 <= table.loc[0, "probability"] <= 1

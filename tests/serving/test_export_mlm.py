"""An ``mlm`` run exports to a Hugging Face masked LM that gives the run's logits."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from embreg.recipes import load_recipe  # noqa: E402
from embreg.recipes.run import run_single  # noqa: E402
from embreg.serving import load  # noqa: E402
from embreg.serving.exporting import export  # noqa: E402
from tests.helpers.finetune_tiny import tiny_checkpoint  # noqa: E402


def test_an_mlm_run_exports_to_auto_model_for_masked_lm(tmp_path: Path) -> None:
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

    bert = tiny_checkpoint(tmp_path / "bert", mask=True)
    overrides = ["data.max_texts=32", "data.valid_size=16", "data.test_size=16", "data.max_length=24"]
    run_single(
        load_recipe("mlm", [*overrides, "train.batch_size=16", "train.progress=false", f"model.pretrained={bert}"]),
        tmp_path / "run",
    )
    run = load(tmp_path / "run")
    export(run, tmp_path / "hf")
    hf = AutoModelForMaskedLM.from_pretrained(tmp_path / "hf").eval()
    batch = run.prepared.tensors["test"]
    with torch.no_grad():
        ours = run.model(batch).predictions
        theirs = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    assert torch.allclose(ours, theirs[batch["labels"] != -100], atol=1e-5)
    encoder = AutoModel.from_pretrained(tmp_path / "hf", add_pooling_layer=False)
    assert torch.equal(encoder.embeddings.word_embeddings.weight, run.model.encoder.embeddings.word_embeddings.weight)
    assert AutoTokenizer.from_pretrained(tmp_path / "hf").mask_token == "[MASK]"

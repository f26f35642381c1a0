"""``export``: a trained run's model in formats other tools load, with the ids of its data.

* A fine-tuned encoder classifier with ``[CLS]`` pooling (``model.pooling: cls`` on an encoder with a pooler, BERT's
  recipe) becomes a Hugging Face directory: ``transformers.AutoModelForSequenceClassification.from_pretrained(DIR)``
  gives the same logits (the encoder's weights, its pooler, and the head as the ``classifier``), and
  ``AutoTokenizer.from_pretrained(DIR)`` the run's tokenizer; ``id2label`` / ``label2id`` of ``config.json`` hold
  the class names of the training data (``LABEL_0``, ... only for a regression run, which has none).
* With mean pooling (all-MiniLM-L6-v2's, the default) no ``AutoModelFor...`` class computes the same logits (they
  pool ``[CLS]``), so the directory holds the fine-tuned encoder for ``transformers.AutoModel`` and the tokenizer,
  and ``head.safetensors`` (``weight``, ``bias``) with ``embreg_head.json``: logits = head(mean of the last hidden
  states over the attention mask); ``config.json`` holds ``id2label`` / ``label2id`` as above. Loading that
  directory with ``AutoModelForSequenceClassification`` would give a new, untrained head: ``embreg_head.json`` says
  so.
* A masked LM (task ``mlm``) becomes a Hugging Face directory for ``transformers.AutoModelForMaskedLM`` (the same
  logits) and ``AutoModel`` (the continued-pre-trained encoder): :mod:`embreg.tasks.mlm.export`.
* Every other model (recommenders, CTR, language models, the text CNN and BiLSTM, and a multi-task run's model,
  whose several heads no Hugging Face class holds): ``model.safetensors``, the plain ``state_dict`` (tensors
  only, loadable with ``safetensors.torch.load_file``), and ``embreg_export.json``: the task, model, resolved
  recipe and the id vocabularies (``{"user": [original id of index 0, ...], ...}``; a tagger's ``token`` and
  ``tag`` names), with what using the model needs besides (:mod:`embreg.serving.export_usage`: the model class
  and its arguments, a translator's tokenizer files and decoding settings, a CTR model's dense normalisation).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import safetensors.torch
import torch

from embreg.config import to_dict
from embreg.errors import ConfigError

if TYPE_CHECKING:
    from embreg.serving.trained_run import TrainedRun

__all__ = ["export", "check_export_directory", "EXPORT_RECORD"]

EXPORT_RECORD = "embreg_export.json"


def check_export_directory(out: str | Path) -> Path:
    """Refuses an export directory that exists and is not empty, is a file, or lies below a file
    (:func:`embreg.runs.output_paths.check_output_directory`); an export never writes over anything.

    Raises:
        ConfigError: naming the path.
    """
    from embreg.runs.output_paths import check_output_directory

    target = Path(out)
    check_output_directory(target, "export directory")
    if target.is_dir() and any(target.iterdir()):
        raise ConfigError(f"export directory {str(target)!r} exists and is not empty; choose a new one")
    return target


def export(run: TrainedRun, out: str | Path) -> Path:
    """Writes ``run``'s model into the directory ``out`` (see the module docstring); returns ``out``.

    Raises:
        ConfigError: ``out`` exists and is not an empty directory, or cannot be one (:func:`check_export_directory`).
    """
    from embreg.models.pretrained import quiet_loading

    target = check_export_directory(out)
    target.mkdir(parents=True, exist_ok=True)
    usage: dict[str, Any] = {}
    if run.recipe.model.name == "encoder-classifier" and getattr(run.recipe.data, "task", None) != "multi":
        with quiet_loading():  # no "Writing model shards" bar of transformers' save_pretrained
            _encoder(run, target)  # one head: a Hugging Face sequence classifier (a multi-task run's heads: below)
    elif run.recipe.model.name == "encoder-mlm":
        from embreg.tasks.mlm.export import export_masked_lm

        with quiet_loading():
            export_masked_lm(run, target)
    else:
        from embreg.serving.export_usage import usage_record

        tensors = {key: value.detach().cpu().contiguous().clone() for key, value in run.model.state_dict().items()}
        safetensors.torch.save_file(tensors, str(target / "model.safetensors"))
        usage = usage_record(run, target)
    record = {
        "format": "embreg-export",
        "task": run.task,
        "model": run.recipe.model.name,
        "checkpoint": run.checkpoint,
        "recipe": to_dict(run.recipe),
        "vocabularies": {kind: _plain(vocab.labels) for kind, vocab in run.vocabularies.items()},
        **usage,
    }
    (target / EXPORT_RECORD).write_text(json.dumps(record, indent=2, default=str) + "\n")
    return target


def _plain(labels: Any) -> list:
    return [label.item() if hasattr(label, "item") else label for label in list(labels)]


def _encoder(run: TrainedRun, target: Path) -> None:
    from embreg.models.pretrained import load_pretrained, require_transformers

    transformers = require_transformers()
    model: Any = run.model
    encoder: Any = model.encoder
    _, tokenizer = load_pretrained(run.recipe.model.pretrained, progress=False)
    tokenizer.save_pretrained(str(target))
    num_labels = int(model.num_labels)
    names = list(run.vocabularies["label"].labels) if "label" in run.vocabularies else []
    pooler = getattr(encoder, "pooler", None)
    if model.pooling == "cls" and isinstance(pooler, torch.nn.Module):
        config = copy.deepcopy(encoder.config)
        config.num_labels = num_labels
        config.problem_type = "regression" if num_labels == 1 else "single_label_classification"
        if names:
            config.id2label = {i: str(name) for i, name in enumerate(names)}
            config.label2id = {str(name): i for i, name in enumerate(names)}
        hf = transformers.AutoModelForSequenceClassification.from_config(config)
        classifier = getattr(hf, "classifier", None)
        if not isinstance(classifier, torch.nn.Linear):
            raise ConfigError(
                f"{type(hf).__name__} has no linear 'classifier' head to take the run's head; export supports "
                "BERT-family encoders whose sequence classifier is pooler -> dropout -> linear"
            )
        getattr(hf, hf.base_model_prefix).load_state_dict(encoder.state_dict())
        classifier.load_state_dict(model.head.state_dict())
        hf.save_pretrained(str(target))
        return
    encoder.save_pretrained(str(target))
    if names:  # the class names of the training data in config.json, as the [CLS] export has them
        config = copy.deepcopy(encoder.config)
        config.id2label = {i: str(name) for i, name in enumerate(names)}
        config.label2id = {str(name): i for i, name in enumerate(names)}
        config.save_pretrained(str(target))
    head = model.head
    safetensors.torch.save_file(
        {"weight": head.weight.detach().cpu().contiguous(), "bias": head.bias.detach().cpu().contiguous()},
        str(target / "head.safetensors"),
    )
    (target / "embreg_head.json").write_text(
        json.dumps(
            {
                "pooling": model.pooling,
                "num_labels": num_labels,
                "labels": [str(name) for name in names],
                "logits": "head.weight @ mean(last_hidden_state over attention_mask) + head.bias; "
                "load the encoder with transformers.AutoModel (AutoModelForSequenceClassification would add a "
                "new, untrained head)",
            },
            indent=2,
        )
        + "\n"
    )

"""What using an exported model needs besides its weights, for the exports that are a plain ``state_dict``.

:func:`embreg.serving.exporting.export` adds :func:`usage_record` to ``embreg_export.json`` and the files it names to
the export directory, so that the model runs without the run directory (docs/exports.md shows the lines):

=============  =====================================================================================================
every task     ``model_class``: the class whose ``state_dict`` ``model.safetensors`` is (``module.Class``)
tagging        ``model_args``: ``BiLSTMCRF(len(vocabularies["token"]), vocabularies["tag"], **model_args)``;
               ``tokens``: how a sentence becomes ids (``split``: ``whitespace`` for runs on CoNLL files, or the
               function the reviews-silver text was split with; ``pad_id`` 0, ``unknown_id`` 1: a token not in the
               vocabulary). The CRF's scheme constraints are not weights: the class rebuilds them from the tag
               names and ``model_args["tag_scheme"]``, so ``model.decode`` gives valid BIO / IOBES sequences.
translation    ``source_tokenizer.json`` and ``target_tokenizer.json`` (Hugging Face ``tokenizers`` files:
               ``tokenizers.Tokenizer.from_file``; the same vocabulary twice when ``data.joint_vocab``),
               ``model_args``: ``TransformerTranslator(source vocab size, target vocab size, **model_args)``,
               ``decoding``: the special ids (``pad_id``, ``bos_id``, ``eos_id``, ``unk_id``), ``max_source_tokens``
               (a source is cut to these before ``</s>``), ``max_len`` (tokens generated at most, ``</s>``
               included) and the run's beam-search defaults ``beam``, ``alpha``, ``beta``
lm             ``tokens``: how a line becomes words (``split``: the function the training text was split with),
               ``unknown_id`` (``<unk>``) and ``eos_id`` (``<eos>``, which also starts every line)
ctr            ``dense``: the dense columns and the training ``mean`` and ``std`` that normalise them
text models    (``text-cnn``, ``bilstm-attn``, multi-task encoders) the tokenizer of ``model.pretrained``,
               saved with ``save_pretrained`` (``transformers.AutoTokenizer.from_pretrained(DIR)``)
=============  =====================================================================================================
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from embreg.serving.trained_run import TrainedRun

__all__ = ["usage_record", "TOKENIZER_FILES"]

TOKENIZER_FILES = {"source": "source_tokenizer.json", "target": "target_tokenizer.json"}
"""The translation export's tokenizer file of each side."""


def usage_record(run: TrainedRun, target: Path) -> dict[str, Any]:
    """The ``embreg_export.json`` entries of a ``state_dict`` export (module docstring); writes the files they name
    into ``target``."""
    model = run.model
    record: dict[str, Any] = {"model_class": f"{type(model).__module__}.{type(model).__qualname__}"}
    if run.task == "tagging":
        record["model_args"] = dataclasses.asdict(run.recipe.model.config)
        split = "whitespace" if run.recipe.data.path is not None else "embreg.data.datasets.review_tags.tokenize"
        record["tokens"] = {"split": split, "pad_id": 0, "unknown_id": 1}
    elif run.task == "translation":
        record.update(_translation(run, target))
    elif run.task == "lm":
        from embreg.data.text_vocab import EOS

        record["tokens"] = {"split": "embreg.data.text_corpus.tokenize_line", "unknown_id": 0}
        record["tokens"]["eos_id"] = int(run.prepared.vocab.index[EOS])
    elif run.task == "ctr":
        record["dense"] = {
            "columns": list(run.prepared.table.dense_names),
            "mean": [float(x) for x in run.prepared.dense_mean],
            "std": [float(x) for x in run.prepared.dense_std],
        }
    pretrained = getattr(run.recipe.model.config, "pretrained", None)
    if pretrained is not None:
        from embreg.models.pretrained import load_pretrained

        load_pretrained(pretrained, progress=False)[1].save_pretrained(str(target))
    return record


def _translation(run: TrainedRun, target: Path) -> dict[str, Any]:
    from embreg.models.transformer_nmt import SPECIAL_IDS

    for side, name in TOKENIZER_FILES.items():
        run.prepared.tokenizers[side].save(str(target / name))
    d = run.recipe.data
    return {
        "model_args": dataclasses.asdict(run.recipe.model.config),
        "tokenizers": dict(TOKENIZER_FILES),
        "decoding": {
            **{f"{name}_id": index for name, index in SPECIAL_IDS.items()},
            "max_source_tokens": d.max_tokens,
            "max_len": d.max_tokens + 1,
            "beam": d.beam,
            "alpha": d.alpha,
            "beta": d.beta,
        },
    }

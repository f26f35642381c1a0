"""The masked-LM head a ``model.pretrained`` carries, so that continued pre-training keeps it.

An ``encoder-mlm`` model (:class:`~embreg.models.encoder_mlm.MaskedLanguageModel`) continues from a pretrained
encoder. When ``model.pretrained`` holds a trained MLM head too, the head is taken with the encoder, and the
continued model starts exactly where the pretrained one stopped (the same loss); otherwise the head is fresh.

=====================================================  ===========================================================
``model.pretrained``                                   head
=====================================================  ===========================================================
a Hugging Face directory of a BERT masked LM           ``cls.predictions.{transform.dense, transform.LayerNorm,
(``BertForMaskedLM``, e.g. ``embreg export`` of an     bias}`` of its safetensors weights (one file or shards)
``mlm`` run)
an ``mlm`` run directory                               ``head.*`` of its ``best.safetensors``
anything else (the packaged all-MiniLM-L6-v2 ships     fresh (:class:`~embreg.models.encoder_mlm.MaskedLMHead`)
no head; a folder with pickled weights only)
=====================================================  ===========================================================

The decoder is tied to the word embeddings, as in BERT; a checkpoint with an untied decoder weight (one that
differs from its word embeddings) is refused, since the head would not compute what it computed there.

Example:
    >>> weights, source = pretrained_mlm_head("all-minilm-l6-v2")  # doctest: +SKIP
    >>> weights is None, source  # doctest: +SKIP
    (True, 'fresh MLM head: all-minilm-l6-v2 has none')
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from embreg.errors import DataError

__all__ = ["pretrained_mlm_head", "HF_HEAD_KEYS"]

HF_PREFIX = "cls.predictions."
HF_HEAD_KEYS = {
    "dense.weight": "transform.dense.weight",
    "dense.bias": "transform.dense.bias",
    "layer_norm.weight": "transform.LayerNorm.weight",
    "layer_norm.bias": "transform.LayerNorm.bias",
    "bias": "bias",
}
""":class:`~embreg.models.encoder_mlm.MaskedLMHead` parameter -> its name under ``cls.predictions.`` in BERT."""
HF_BIAS_ALIAS = "decoder.bias"  # the same tensor as ``bias`` in BERT (tied); some checkpoints keep only this name
RUN_HEAD_PREFIX = "head."


def pretrained_mlm_head(name_or_path: str | Path) -> tuple[dict[str, torch.Tensor] | None, str]:
    """The MLM head weights of ``model.pretrained`` (``{MaskedLMHead parameter: tensor}``, ``None``: it has none)
    and how a run's report names the head (see the module docstring).

    Raises:
        DataError: a head with some of its weights missing, or an untied decoder.
    """
    from embreg.models.pretrained import checkpoint_directory
    from embreg.models.run_encoder import is_run_directory, run_head_weights

    path = Path(name_or_path).expanduser()
    if is_run_directory(path):
        return run_head_weights(path, RUN_HEAD_PREFIX), f"MLM head of the mlm run '{path.resolve()}'"
    directory = checkpoint_directory(name_or_path)
    weights = _hf_head(directory)
    if weights is None:
        return None, f"fresh MLM head: {name_or_path} has none"
    return weights, f"MLM head of '{directory.resolve()}' (cls.predictions)"


def _safetensors_files(directory: Path) -> dict[str, Path]:
    """``{tensor name: file}`` of a directory's safetensors weights (one ``model.safetensors`` or shards)."""
    from safetensors import safe_open

    index = directory / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        return {name: directory / file for name, file in weight_map.items()}
    single = directory / "model.safetensors"
    if not single.is_file():
        return {}
    with safe_open(str(single), framework="pt") as f:
        return {name: single for name in f.keys()}


def _read(files: dict[str, Path], names: list[str]) -> dict[str, torch.Tensor]:
    from safetensors import safe_open

    out = {}
    for name in names:
        with safe_open(str(files[name]), framework="pt") as f:
            out[name] = f.get_tensor(name)
    return out


def _hf_head(directory: Path) -> dict[str, torch.Tensor] | None:
    files = _safetensors_files(directory)
    if not any(name.startswith(HF_PREFIX) for name in files):
        return None
    names = {ours: HF_PREFIX + theirs for ours, theirs in HF_HEAD_KEYS.items()}
    if names["bias"] not in files:
        names["bias"] = HF_PREFIX + HF_BIAS_ALIAS
    missing = [name for name in names.values() if name not in files]
    if missing:
        raise DataError(
            f"{directory}: its masked-LM head lacks {', '.join(missing)}; model.pretrained needs a whole BERT "
            "masked-LM head (cls.predictions) or none"
        )
    _check_tied_decoder(directory, files)
    read = _read(files, list(names.values()))
    return {ours: read[name] for ours, name in names.items()}


def _check_tied_decoder(directory: Path, files: dict[str, Path]) -> None:
    decoder = HF_PREFIX + "decoder.weight"
    if decoder not in files:
        return
    embeddings = [name for name in files if name.endswith("embeddings.word_embeddings.weight")]
    read = _read(files, [decoder, *embeddings[:1]])
    if not embeddings or not torch.equal(read[decoder], read[embeddings[0]]):
        raise DataError(
            f"{directory}: its masked-LM decoder ({decoder}) is not tied to the word embeddings; the encoder-mlm "
            "head ties them (as BERT does), so it cannot continue this head"
        )

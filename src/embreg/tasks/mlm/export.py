"""Export of an ``mlm`` run: a Hugging Face masked-LM directory that gives the run's logits.

The MLM head of :class:`~embreg.models.encoder_mlm.MaskedLanguageModel` is BERT's (dense, activation, LayerNorm, a
decoder tied to the word embeddings plus a bias), so ``transformers.AutoModelForMaskedLM.from_pretrained(DIR)``
computes the same logits, and ``transformers.AutoModel.from_pretrained(DIR)`` gives the continued-pre-trained
encoder (without a pooler: the MLM loss never trained one, so none is exported). ``AutoTokenizer`` reads the run's
tokenizer from the same directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embreg.errors import ConfigError

__all__ = ["export_masked_lm"]


def export_masked_lm(run: Any, target: Path) -> None:
    """Writes ``run``'s encoder and MLM head as a Hugging Face masked LM, and its tokenizer, into ``target``."""
    from embreg.models.pretrained import load_pretrained, require_transformers

    transformers = require_transformers()
    model: Any = run.model
    _, tokenizer = load_pretrained(run.recipe.model.pretrained, progress=False)
    tokenizer.save_pretrained(str(target))
    hf = transformers.AutoModelForMaskedLM.from_config(model.encoder.config)
    predictions = getattr(getattr(hf, "cls", None), "predictions", None)
    if predictions is None or not hasattr(predictions, "transform"):
        raise ConfigError(
            f"{type(hf).__name__} has no BERT masked-LM head (cls.predictions); export supports BERT-family encoders"
        )
    encoder = {k: v for k, v in model.encoder.state_dict().items() if not k.startswith("pooler.")}
    getattr(hf, hf.base_model_prefix).load_state_dict(encoder)
    predictions.transform.dense.load_state_dict(model.head.dense.state_dict())
    predictions.transform.LayerNorm.load_state_dict(model.head.layer_norm.state_dict())
    predictions.bias.data.copy_(model.head.bias.detach())
    hf.tie_weights()
    hf.save_pretrained(str(target))

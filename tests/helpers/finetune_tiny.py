"""Tiny models for the fine-tuning regulariser tests: a random 3-layer BERT and a linear stack."""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, BertForSequenceClassification, BertModel

from embreg.models import EncoderClassifier, ModelOutput
from embreg.models.hidden_states import hidden_states_dict
from embreg.models.pretrained import quiet_loading
from embreg.regularizers.layer_stack import SequentialStack
from tests.helpers.threads import one_thread  # noqa: F401 (re-exported for the fine-tuning tests)

VOCAB = 40


def tiny_config(layers: int = 3, dropout: float = 0.0, num_labels: int = 2) -> BertConfig:
    return BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        num_labels=num_labels,
    )


def tiny_classifier(num_labels: int = 2, dropout: float = 0.0, layers: int = 3, seed: int = 0) -> EncoderClassifier:
    torch.manual_seed(seed)
    return EncoderClassifier(BertModel(tiny_config(layers, dropout)), num_labels, dropout=dropout)


def tiny_hf_classifier(num_labels: int = 2, dropout: float = 0.0, seed: int = 0) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    return BertForSequenceClassification(tiny_config(3, dropout, num_labels))


def tiny_batch(batch: int = 4, length: int = 7, num_labels: int = 2, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, length + 1, (batch,), generator=g)
    lengths[0] = length
    mask = (torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)).long()
    ids = torch.randint(1, VOCAB, (batch, length), generator=g) * mask
    labels = torch.randn(batch, generator=g) if num_labels == 1 else torch.randint(0, num_labels, (batch,), generator=g)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class LinearStackModel(nn.Module):
    """``x -> W_1 x -> W_2 W_1 x -> ...`` (no bias, no nonlinearity), so noise effects are linear and exact."""

    def __init__(self, weights: list[torch.Tensor]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList()
        for w in weights:
            layer = nn.Linear(w.shape[1], w.shape[0], bias=False)
            layer.weight.data.copy_(w)
            self.blocks.append(layer)

    def layer_stack(self) -> SequentialStack:
        return SequentialStack(self.blocks)

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        states = [batch["x"]]
        for block in self.blocks:
            states.append(block(states[-1]))
        return ModelOutput(states[-1].sum(dim=-1), hidden_states_dict(states))

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        return (output.predictions - batch["y"]).pow(2).mean()


def tiny_checkpoint(directory, *, mask: bool = False) -> object:
    """Saves a 2-layer random BERT and a whitespace word-level fast tokenizer: a local HF checkpoint directory
    (``mask``: the vocabulary ends with a ``[MASK]`` token, as a masked LM needs)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["good", "bad", "dress", "film", "the", "a", "is", "not", ".", ","]
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words, *(["[MASK]"] if mask else [])])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        **({"mask_token": "[MASK]"} if mask else {}),
    ).save_pretrained(directory)
    torch.manual_seed(0)
    bert = BertModel(
        BertConfig(
            vocab_size=len(vocab),
            hidden_size=8,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=16,
            max_position_embeddings=64,
        )
    )
    with quiet_loading():  # no "Writing model shards" bar in the stderr of a test that builds it lazily
        bert.save_pretrained(directory)
    return directory

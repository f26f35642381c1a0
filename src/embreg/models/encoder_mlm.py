"""A pretrained encoder with a masked-LM head, following embreg's model protocol (task ``mlm``).

``MaskedLanguageModel(encoder)`` puts BERT's masked-LM head (Devlin et al. 2019; the head of Hugging Face's
``BertForMaskedLM``) on a BERT-family encoder: a dense transform ``D -> D``, the encoder's activation, LayerNorm,
then a decoder onto the vocabulary whose weight is the encoder's word-embedding matrix (tied: the same tensor, read
at every call) plus a bias of its own. The packaged all-MiniLM-L6-v2 ships no MLM head, so the transform is
initialised fresh (N(0, 0.02^2) weights, zero biases, LayerNorm at identity); only the decoder's weight is
pretrained, through the tie. A ``model.pretrained`` that holds a trained MLM head (a Hugging Face masked LM such as
``embreg export`` of an ``mlm`` run, or an ``mlm`` run directory) gives its head instead
(:mod:`embreg.models.pretrained_mlm_head`), so continued pre-training starts at the loss it stopped at.

Index transforms (sse-stochastic-shared-embeddings.txt, Sec. 4.4, SSE-SE on the input word pieces and on the
embeddings of the labels): ``token_transform`` acts on the input ids the embedding layer looks up, i.e. *after*
BERT's masking (made in the data, :mod:`embreg.data.mlm_masking`); ``label_transform`` acts on the masked-LM targets,
the original ids of the selected positions, whose output embeddings are the tied decoder's rows. Both run in
training only and should exclude the tokenizer's special ids (``[MASK]`` included, so a masked position stays
masked); [CLS], the last attended token and padding keep their ids by position too, as in
:class:`~embreg.models.encoder_classifier.EncoderClassifier`.

The decoder runs on the selected positions only (``labels != -100``): a batch of ``B x T`` tokens with 15% selected
costs ``0.15 B T`` rows of the ``D x V`` product instead of ``B T``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from embreg.data.mlm_masking import IGNORE_INDEX
from embreg.errors import ConfigError, DataError
from embreg.models.encoder_classifier import TEXT_KEYS, trim_padding
from embreg.models.hidden_states import hidden_states_dict
from embreg.models.output import ModelOutput
from embreg.models.pretrained import recorded_checkpoint
from embreg.models.transform_sites import is_passed_through, present_transforms
from embreg.models.word_piece_swaps import swap_word_pieces
from embreg.registry import register

__all__ = ["MaskedLanguageModel", "MaskedLMHead", "MaskedLMConfig"]


class MaskedLMHead(nn.Module):
    """BERT's MLM head with the decoder tied to ``word_embeddings``: ``(M, D) -> (M, V)`` logits.

    Args:
        word_embeddings: the encoder's input embedding table ``(V, D)`` (its weight is the decoder's).
        hidden_act: the encoder's activation (``"gelu"``, ``"relu"``, ...).
        layer_norm_eps: the encoder's LayerNorm epsilon.
        init_std: standard deviation of the fresh dense transform.

    Example:
        >>> head = MaskedLMHead(nn.Embedding(30, 8))
        >>> head(torch.randn(5, 8)).shape
        torch.Size([5, 30])
    """

    def __init__(
        self,
        word_embeddings: nn.Embedding,
        hidden_act: str = "gelu",
        layer_norm_eps: float = 1e-12,
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        from transformers.activations import ACT2FN

        vocab_size, hidden_size = word_embeddings.weight.shape
        if hidden_act not in ACT2FN:
            raise ConfigError(f"hidden_act={hidden_act!r} is not a transformers activation ({', '.join(ACT2FN)})")
        self.word_embeddings = [word_embeddings]  # a list: the table belongs to the encoder, not to the head
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = ACT2FN[hidden_act]
        self.layer_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        nn.init.normal_(self.dense.weight, std=init_std)
        nn.init.zeros_(self.dense.bias)

    @property
    def decoder_weight(self) -> torch.Tensor:
        """The tied decoder weight ``(V, D)``: the encoder's word embeddings."""
        return self.word_embeddings[0].weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(self.layer_norm(self.activation(self.dense(hidden))), self.decoder_weight, self.bias)

    def load_weights(self, weights: dict[str, torch.Tensor], source: str) -> None:
        """Takes a trained head's ``dense``, ``layer_norm`` and ``bias`` (the decoder stays tied).

        Raises:
            DataError: a missing or unexpected parameter, or a shape that differs from this head's.
        """
        own = self.state_dict()
        if set(weights) != set(own):
            raise DataError(f"{source}: MLM head parameters {sorted(weights)} do not match {sorted(own)}")
        for name, tensor in weights.items():
            if tuple(tensor.shape) != tuple(own[name].shape):
                raise DataError(
                    f"{source}: MLM head parameter {name} has shape {tuple(tensor.shape)}, the encoder's head "
                    f"needs {tuple(own[name].shape)}"
                )
        self.load_state_dict(weights)


class MaskedLanguageModel(nn.Module):
    """Encoder + MLM head; ``forward(batch) -> ModelOutput`` with logits at the selected positions.

    Args:
        encoder: a Hugging Face BERT-family encoder (``embeddings.word_embeddings``, ``encoder.layer``, ``config``).
        token_transform: ids -> ids module on the input word pieces in training (e.g. ``SSE(V, p, exclude=...)``).
        label_transform: ids -> ids module on the masked-LM targets ``(M,)`` in training (e.g. ``LabelSSE``).
        init_std: standard deviation of the fresh head transform.

    Batch: ``input_ids`` ``(B, T)`` (already masked), ``attention_mask`` ``(B, T)``, ``labels`` ``(B, T)`` (the
    original id at selected positions, ``-100`` elsewhere). Output: ``predictions`` ``(M, V)`` logits of the ``M``
    selected positions (row-major order), ``hidden`` the encoder's states ``h_0..h_L`` ``(B, T', D)``.

    Example:
        >>> from transformers import BertConfig, BertModel
        >>> cfg = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
        ...                  intermediate_size=16)
        >>> model = MaskedLanguageModel(BertModel(cfg))
        >>> batch = {"input_ids": torch.tensor([[2, 5, 4, 3]]), "attention_mask": torch.ones(1, 4, dtype=torch.long),
        ...          "labels": torch.tensor([[-100, 9, -100, -100]])}
        >>> out = model(batch)
        >>> out.predictions.shape, model.loss(batch, out).dim()
        (torch.Size([1, 30]), 0)
    """

    base_model_prefix = "encoder"  # the pretrained part, for L2-SP (embreg.regularizers.l2sp.pretrained_prefixes)

    def __init__(
        self,
        encoder: nn.Module,
        *,
        token_transform: nn.Module | None = None,
        label_transform: nn.Module | None = None,
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        config = getattr(encoder, "config", None)
        embeddings = getattr(getattr(encoder, "embeddings", None), "word_embeddings", None)
        if config is None or not isinstance(embeddings, nn.Embedding):
            raise ConfigError(
                f"{type(encoder).__name__} is not a BERT-family encoder (needs config and embeddings.word_embeddings)"
            )
        if init_std <= 0:
            raise ConfigError(f"init_std={init_std} must be > 0")
        self.encoder = encoder
        pooler = getattr(encoder, "pooler", None)
        if isinstance(pooler, nn.Module):
            pooler.requires_grad_(False)  # the MLM loss never reads the pooler
        self.head = MaskedLMHead(
            embeddings,
            hidden_act=str(getattr(config, "hidden_act", "gelu")),
            layer_norm_eps=float(getattr(config, "layer_norm_eps", 1e-12)),
            init_std=init_std,
        )
        self.token_transform = token_transform
        self.label_transform = label_transform

    @property
    def vocab_size(self) -> int:
        return int(self.head.decoder_weight.shape[0])

    def swap_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """``token_transform`` on ``(B, T)`` ids in training; [CLS], the last attended token and padding kept."""
        return swap_word_pieces(self.token_transform, input_ids, attention_mask, self.training)

    def step_targets(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The targets ``(M,)`` of the selected positions, through ``label_transform`` in training."""
        labels = batch["labels"]
        targets = labels[labels != IGNORE_INDEX]
        transform = self.label_transform
        if transform is None or not self.training or is_passed_through(transform):
            return targets
        return transform(targets)

    def index_transforms(self) -> list[nn.Module]:
        """The token and label transforms that are set (:mod:`embreg.models.transform_sites`)."""
        return present_transforms([self.token_transform, self.label_transform])

    def draw_index_transforms(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` (trimmed) with ``input_ids`` and the selected ``labels`` as this training step draws them."""
        drawn = dict(trim_padding(batch))
        drawn["input_ids"] = self.swap_tokens(drawn["input_ids"], drawn.get("attention_mask"))
        if "labels" in drawn:
            labels = drawn["labels"].clone()
            labels[labels != IGNORE_INDEX] = self.step_targets(drawn)
            drawn["labels"] = labels
        return drawn

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        batch = trim_padding(batch)
        inputs = {k: batch[k] for k in TEXT_KEYS if k in batch}
        inputs["input_ids"] = self.swap_tokens(inputs["input_ids"], inputs.get("attention_mask"))
        out = self.encoder(**inputs, output_hidden_states=True, return_dict=True)
        states = out.hidden_states
        selected = batch["labels"][:, : states[-1].shape[1]] != IGNORE_INDEX  # trimmed columns hold no target
        return ModelOutput(self.head(states[-1][selected]), hidden_states_dict(states))

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Mean cross-entropy over the selected positions (against :meth:`step_targets`)."""
        return F.cross_entropy(output.predictions, self.step_targets(batch))


@dataclass
class MaskedLMConfig:
    """The pretrained encoder under the MLM head (``model: {name: encoder-mlm, ...}``).

    Attributes:
        pretrained: a registry name (``all-minilm-l6-v2``), a local Hugging Face checkpoint directory, or an ``mlm``
            run directory (continued pre-training from its best checkpoint).
        init_std: standard deviation of the head's fresh dense transform (BERT: 0.02), when ``pretrained`` has
            no MLM head of its own.
    """

    pretrained: str = "all-minilm-l6-v2"
    init_std: float = 0.02

    def __post_init__(self) -> None:
        self.pretrained = recorded_checkpoint(self.pretrained)
        if self.init_std <= 0:
            raise ConfigError(f"model.init_std={self.init_std} must be > 0")


@register(
    "model",
    "encoder-mlm",
    config=MaskedLMConfig,
    tasks=("mlm",),
    kinds=("token", "label"),
    embeddings=("uniform",),
    provides=("linear_layers", "pretrained"),
    summary="pretrained BERT-family encoder + masked-LM head tied to its word embeddings",
    reference="sse-stochastic-shared-embeddings.txt, Sec. 4.4",
)
def build_encoder_mlm(config: MaskedLMConfig, context: Any) -> MaskedLanguageModel:
    """The pretrained encoder with its MLM head (``model.pretrained``'s own where it has one, else a fresh one:
    :mod:`embreg.models.pretrained_mlm_head`) and the recipe's token / label transforms."""
    from embreg.models.pretrained import load_pretrained
    from embreg.models.pretrained_mlm_head import pretrained_mlm_head

    encoder, _ = load_pretrained(config.pretrained, progress=context.recipe.train.progress)
    model = MaskedLanguageModel(
        encoder,
        token_transform=context.transforms.get("token"),
        label_transform=context.transforms.get("label"),
        init_std=config.init_std,
    )
    weights, source = pretrained_mlm_head(config.pretrained)
    if weights is not None:
        model.head.load_weights(weights, source)
    return model

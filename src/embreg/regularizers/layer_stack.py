"""Layer stacks: run a model's layers again from layer ``b`` with a perturbed input, and read its clean states.

Noise-stability regularisers (LNSR, R3F, SMART) need two things the plain protocol does not give: the clean hidden
states of the step's forward pass, and a way to push a perturbed tensor through layers ``b..L`` (and the head).
A :class:`LayerStack` offers both for one model:

* ``clean_states(output)``: the ``L + 1`` states ``h_0..h_L`` of the clean forward, read from
  ``output.hidden`` under :func:`hidden_state_key` (``h_0`` is the input of layer 1, ``h_r`` the output of layer
  ``r``; lnsr-noise-stability-bert.txt, Sec. 3.1 writes ``x^b = h_{b-1}``);
* ``run(hidden, batch, start)``: the outputs of layers ``start..L`` given the input of layer ``start``;
* ``predict(last_hidden, batch)``: the model's head on the last layer's output (logits ``(B, C)`` or ``(B,)``).

:func:`layer_stack` finds the stack of a model: the model's own ``layer_stack()`` method (any model of yours, e.g.
built from a list of blocks with :class:`SequentialStack`; embreg's NCF, DLRM and LSTM language model have one);
for embreg's :class:`~embreg.models.EncoderClassifier` (an ``encoder`` and ``predict_from_hidden``) and for Hugging Face BERT-family classifiers
(``BertForSequenceClassification``, ``RobertaForSequenceClassification``, ...), :class:`HFEncoderStack`.

:class:`DropoutReplay` lets a second pass through layers ``b..L`` draw exactly the dropout masks the clean pass
drew there, by saving the random-number state when layer ``b`` starts and restoring it for the replay. A noisy
pass then differs from the clean one only by the injected noise.

:class:`LayerStack`, :class:`SequentialStack` and :func:`check_layer_index` live in :mod:`embreg.nn.layer_stack`
(so that models can build stacks without importing this floor) and are re-exported here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol, cast

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.models.hidden_states import hidden_state_key, hidden_states_dict
from embreg.nn.layer_stack import LayerStack, SequentialStack, check_layer_index

__all__ = [
    "LayerStack",
    "SequentialStack",
    "HFEncoderStack",
    "DropoutReplay",
    "hidden_state_key",
    "hidden_states_dict",
    "layer_stack",
    "check_layer_index",
]

Batch = dict[str, torch.Tensor]
Head = Callable[[torch.Tensor, Batch], torch.Tensor]


class _ExtendedMaskModel(Protocol):
    """A transformers 4 ``PreTrainedModel`` (``ModuleUtilsMixin``): what :func:`_bidirectional_mask` calls."""

    def get_extended_attention_mask(
        self, attention_mask: torch.Tensor, input_shape: tuple[int, ...]
    ) -> torch.Tensor: ...


def _bidirectional_mask(base: nn.Module, hidden: torch.Tensor, mask: torch.Tensor | None) -> Any:
    """The attention mask a Hugging Face encoder layer expects, for either transformers 5 or 4."""
    if mask is None:
        return None
    try:
        from transformers.masking_utils import create_bidirectional_mask
    except ImportError:  # transformers 4: additive (B, 1, 1, T) mask
        return cast(_ExtendedMaskModel, base).get_extended_attention_mask(mask, mask.shape)
    return create_bidirectional_mask(config=base.config, inputs_embeds=hidden, attention_mask=mask)


class HFEncoderStack(LayerStack):
    """The layers of a Hugging Face BERT-family encoder (``base.encoder.layer``) with a given head.

    Args:
        base: the encoder (``BertModel``, ``RobertaModel``, ...): it has ``embeddings`` and ``encoder.layer``.
        head: ``(h_L (B, T, D), batch) -> predictions``.

    The attention mask is ``batch["attention_mask"]`` cut to the states' length ``T`` (models may trim padding).
    """

    def __init__(self, base: nn.Module, head: Head) -> None:
        layers = getattr(getattr(base, "encoder", None), "layer", None)
        if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
            raise ConfigError(
                f"{type(base).__name__} has no encoder.layer list; HFEncoderStack needs a BERT-family encoder"
            )
        self.base = base
        self.layers = layers
        self.head = head
        self.num_layers = len(layers)

    def layer(self, index: int) -> nn.Module:
        check_layer_index(index, self.num_layers)
        return self.layers[index - 1]

    def _mask(self, hidden: torch.Tensor, batch: Batch) -> Any:
        mask = batch.get("attention_mask")
        if mask is None:
            return None
        return _bidirectional_mask(self.base, hidden, mask[:, : hidden.shape[1]])

    def run_layer(self, index: int, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        out = self.layers[index - 1](hidden, self._mask(hidden, batch))
        return out[0] if isinstance(out, tuple) else out

    def predict(self, last_hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        return self.head(last_hidden, batch)


def _hf_classification_head(model: nn.Module, base: nn.Module) -> Head:
    """The head of a Hugging Face ``*ForSequenceClassification`` model as ``(h_L, batch) -> logits``."""
    classifier = getattr(model, "classifier", None)
    if classifier is None:
        raise ConfigError(
            f"{type(model).__name__} has no 'classifier'; give it a layer_stack() method or wrap its "
            "encoder in embreg.models.EncoderClassifier"
        )
    pooler = getattr(base, "pooler", None)
    dropout = getattr(model, "dropout", None)
    if pooler is not None and dropout is not None:  # BERT: dropout(pooler(h[:, 0])) -> linear
        return lambda h, batch: classifier(dropout(pooler(h)))
    if hasattr(classifier, "out_proj"):  # RoBERTa-style heads take the whole sequence
        return lambda h, batch: classifier(h)
    raise ConfigError(
        f"cannot tell how the head of {type(model).__name__} reads the encoder's states; give it a layer_stack() method"
    )


def layer_stack(model: nn.Module) -> LayerStack:
    """The :class:`LayerStack` of ``model``: its own ``layer_stack()``, or the Hugging Face BERT-family adapter.

    Raises:
        ConfigError: the model has neither (the message says what a model needs to offer).

    Example:
        >>> layer_stack(nn.Linear(2, 2))
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: Linear has no layer stack: give it a layer_stack() method returning a LayerStack (see SequentialStack), or use a Hugging Face BERT-family model or embreg.models.EncoderClassifier
    """
    model = getattr(model, "module", model) if isinstance(getattr(model, "module", None), nn.Module) else model
    own = getattr(model, "layer_stack", None)
    if callable(own):
        return own()
    predict_from_hidden = getattr(model, "predict_from_hidden", None)
    if callable(predict_from_hidden):
        encoder = getattr(model, "encoder", None)
        if isinstance(encoder, nn.Module):
            return HFEncoderStack(encoder, predict_from_hidden)  # embreg's EncoderClassifier
    base = getattr(model, "base_model", None)
    if isinstance(base, nn.Module) and isinstance(
        getattr(getattr(base, "encoder", None), "layer", None), nn.ModuleList
    ):
        head = _hf_classification_head(model, base) if base is not model else (lambda h, batch: h)
        return HFEncoderStack(base, head)
    raise ConfigError(
        f"{type(model).__name__} has no layer stack: give it a layer_stack() method returning a LayerStack (see "
        "SequentialStack), or use a Hugging Face BERT-family model or embreg.models.EncoderClassifier"
    )


class DropoutReplay:
    """Replays the dropout masks the clean pass drew inside a layer range, for a second (perturbed) pass.

    ``attach(module)`` hooks the first layer of the range: each time it runs in training mode, the random-number
    state (CPU, and the CUDA device's when the input is there) is saved, keyed by the input tensor. Inside
    ``with replay.replaying(x):`` the state saved when ``x`` entered the layer (the latest one if ``x`` is not
    known) is restored, so the same layers drawing dropout masks of the same shapes draw the same masks; on exit
    the state from before the block returns, so the replay leaves the global stream as it found it.

    Example:
        >>> layer = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
        >>> replay = DropoutReplay(); replay.attach(layer)
        >>> x = torch.ones(2, 3)
        >>> clean = layer(x)
        >>> with replay.replaying(x):
        ...     again = layer(x)
        >>> torch.equal(clean, again)
        True
    """

    _KEEP = 4  # states of the last few passes, so other regularisers' extra passes cannot hide the clean one

    def __init__(self) -> None:
        # per input tensor id: the CPU state, and the CUDA device with its state when the input was on a GPU
        self._states: dict[int, tuple[torch.Tensor, tuple[torch.device, torch.Tensor] | None]] = {}
        self._handle: Any = None
        self._replaying = False

    @property
    def attached(self) -> bool:
        """Whether a layer is hooked."""
        return self._handle is not None

    @property
    def has_state(self) -> bool:
        """Whether a training-mode pass through the hooked layer has been seen."""
        return bool(self._states)

    def attach(self, module: nn.Module) -> None:
        """Hook ``module`` (the first layer of the replayed range); a second call moves the hook."""
        self.detach()
        self._handle = module.register_forward_pre_hook(self._save)

    def detach(self) -> None:
        """Remove the hook and forget saved states."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        self._states.clear()

    def _save(self, module: nn.Module, args: tuple) -> None:
        if not module.training or self._replaying:
            return
        tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
        device = tensor.device if tensor is not None and tensor.device.type == "cuda" else None
        cuda = (device, torch.cuda.get_rng_state(device)) if device is not None else None
        key = id(tensor)
        self._states.pop(key, None)
        self._states[key] = (torch.get_rng_state(), cuda)
        while len(self._states) > self._KEEP:
            self._states.pop(next(iter(self._states)))

    @contextlib.contextmanager
    def replaying(self, key: torch.Tensor | None = None) -> Iterator[None]:
        """Within the block, random draws repeat those of the clean pass whose input to the hooked layer was ``key``.

        Raises:
            ConfigError: no training-mode pass has gone through the hooked layer yet.
        """
        if not self._states:
            raise ConfigError("DropoutReplay has no saved state: the hooked layer has not run in training mode")
        cpu_state, cuda = self._states.get(id(key), next(reversed(self._states.values())))
        saved_cpu = torch.get_rng_state()
        saved_cuda = (cuda[0], torch.cuda.get_rng_state(cuda[0])) if cuda is not None else None
        torch.set_rng_state(cpu_state)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda[1], cuda[0])
        self._replaying = True
        try:
            yield
        finally:
            self._replaying = False
            torch.set_rng_state(saved_cpu)
            if saved_cuda is not None:
                torch.cuda.set_rng_state(saved_cuda[1], saved_cuda[0])

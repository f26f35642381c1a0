"""Layer stacks: a model's layers ``1..L`` as a list that can be run again from any layer, and its clean states.

Noise-stability regularisers (LNSR, R3F, SMART; lnsr-noise-stability-bert.txt, Sec. 3.1 and 5.4) need two things
the plain model protocol does not give: the clean hidden states of the step's forward pass, and a way to push a
perturbed tensor through layers ``b..L`` (and the head). A :class:`LayerStack` offers both for one model:

* ``clean_states(output)``: the ``L + 1`` states ``h_0..h_L`` of the clean forward, read from ``output.hidden``
  under the keys ``hidden_states.<i>`` (written by :func:`embreg.models.hidden_states.hidden_states_dict`;
  ``h_0`` is the input of layer 1, ``h_r`` the output of layer ``r``; Sec. 3.1 writes ``x^b = h_{b-1}``);
* ``run(hidden, batch, start)``: the outputs of layers ``start..L`` given the input of layer ``start``;
* ``predict(last_hidden, batch)``: the model's head on the last layer's output.

This module is the abstract part, on the ``nn`` floor so that models can offer a stack without importing the
regularisers; :mod:`embreg.regularizers.layer_stack` re-exports it beside the adapters (Hugging Face encoders,
dropout replay, ``layer_stack(model)``).

A layer a regulariser hooks (``layer(b)``: LNSR's dropout replay, LayerNoise's input noise) must be a module that
the model's forward really calls with ``h_{b-1}`` as first argument. Models whose layers are slices of a module they
already own (an ``nn.Sequential`` MLP) use :class:`SequentialSlice`: it runs part of that container without
registering it a second time, so parameter names and checkpoints stay as they were.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.nn.connections.base import ConnectedLayer

__all__ = ["LayerStack", "SequentialStack", "SequentialSlice", "check_layer_index", "linear_block_bounds"]

Batch = dict[str, torch.Tensor]


class HasHidden(Protocol):
    """Anything with a ``hidden`` mapping of named tensors, e.g. :class:`embreg.models.output.ModelOutput`."""

    @property
    def hidden(self) -> Mapping[str, torch.Tensor]:  # read-only here, so a dict attribute (ModelOutput's) fits
        ...


def _hidden_state_key(index: int) -> str:
    # The format of embreg.models.hidden_states.hidden_state_key (a test pins the two together); the nn floor does
    # not import models, so it is spelt here too.
    return f"hidden_states.{index}"


def check_layer_index(index: int, num_layers: int, name: str = "layer") -> None:
    """Raises :class:`ConfigError` unless ``1 <= index <= num_layers``.

    Example:
        >>> check_layer_index(2, 3)
        >>> check_layer_index(4, 3, "start")
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: start=4 is outside the model's layer range [1, 3]
    """
    if isinstance(index, bool) or not isinstance(index, int) or not 1 <= index <= num_layers:
        raise ConfigError(f"{name}={index!r} is outside the model's layer range [1, {num_layers}]")


class LayerStack(ABC):
    """The layers of one model as a list ``1..L`` that can be run from any layer; subclasses say how.

    Subclasses set ``num_layers`` and implement :meth:`layer`, :meth:`run_layer` and :meth:`predict`.

    Attributes:
        divergence: how R3F and SMART compare two of :meth:`predict`'s outputs under ``divergence: auto``:
            ``"auto"`` (by shape: symmetric KL of logits, squared error of ``(B,)`` values) or ``"mse"`` (a head
            that returns hidden states, not logits; ``sym_kl`` is then refused).
    """

    num_layers: int
    divergence: str = "auto"

    @abstractmethod
    def layer(self, index: int) -> nn.Module:
        """Layer ``index`` (1-based) as a module, e.g. to hook it."""

    @abstractmethod
    def run_layer(self, index: int, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Output of layer ``index`` (1-based) for input ``hidden``."""

    @abstractmethod
    def predict(self, last_hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The head: predictions from the last layer's output."""

    def run(self, hidden: torch.Tensor, batch: Batch, start: int = 1, stop: int | None = None) -> list[torch.Tensor]:
        """Outputs of layers ``start..stop`` (default ``L``) given ``hidden``, the input of layer ``start``.

        Args:
            hidden: the input of layer ``start``, e.g. ``(B, T, D)`` for a transformer.
            batch: the batch (attention masks and the like).
            start, stop: 1-based, ``1 <= start <= stop <= L``.

        Returns:
            ``stop - start + 1`` tensors, the output of each layer in turn.
        """
        stop = self.num_layers if stop is None else stop
        check_layer_index(start, self.num_layers, "start")
        check_layer_index(stop, self.num_layers, "stop")
        if stop < start:
            raise ConfigError(f"stop={stop} must be >= start={start}")
        outputs = []
        for index in range(start, stop + 1):
            hidden = self.run_layer(index, hidden, batch)
            outputs.append(hidden)
        return outputs

    def clean_states(self, output: HasHidden) -> list[torch.Tensor]:
        """The clean forward's states ``h_0..h_L`` from ``output.hidden`` (a :class:`~embreg.models.ModelOutput`).

        Raises:
            ConfigError: a state is missing (the model's forward did not return its hidden states).
        """
        states = []
        for index in range(self.num_layers + 1):
            key = _hidden_state_key(index)
            if key not in output.hidden:
                raise ConfigError(
                    f"the model output has no hidden state {key!r} (it has {sorted(output.hidden)}); the forward "
                    "pass must return all L + 1 hidden states (embreg's EncoderClassifier does; Hugging Face models "
                    "need output_hidden_states=True, which embreg's HF adapter sets)"
                )
            states.append(output.hidden[key])
        return states


class SequentialStack(LayerStack):
    """A stack of blocks each mapping ``h -> h``, with an optional head: the adapter for your own models.

    Args:
        layers: the blocks in order, layer ``r`` is ``layers[r - 1]``.
        head: ``h_L -> predictions`` (``None``: the last state itself).

    Example:
        >>> stack = SequentialStack([nn.Linear(2, 2), nn.Tanh()], head=nn.Linear(2, 1))
        >>> [t.shape for t in stack.run(torch.zeros(3, 2), {}, start=1)]
        [torch.Size([3, 2]), torch.Size([3, 2])]
    """

    def __init__(
        self, layers: Sequence[nn.Module], head: nn.Module | Callable[[torch.Tensor], torch.Tensor] | None = None
    ) -> None:
        if len(layers) == 0:
            raise ConfigError("a SequentialStack needs at least one layer")
        self.layers = list(layers)
        self.head = head
        self.num_layers = len(self.layers)

    def layer(self, index: int) -> nn.Module:
        check_layer_index(index, self.num_layers)
        return self.layers[index - 1]

    def run_layer(self, index: int, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        return self.layers[index - 1](hidden)

    def predict(self, last_hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        return last_hidden if self.head is None else self.head(last_hidden)


def linear_block_bounds(container: nn.Sequential) -> list[tuple[int, int]]:
    """``[start, stop)`` index ranges of ``container``'s blocks, each block starting at an ``nn.Linear`` or a
    connected layer (:class:`~embreg.nn.connections.ConnectedLayer`).

    An MLP built as ``Linear -> act (-> Dropout)`` per width (:func:`embreg.models.mlp.mlp`) splits into one block
    per ``Linear`` (with layer connections, one per connected layer); modules before the first ``Linear`` join the
    first block.

    Example:
        >>> linear_block_bounds(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)))
        [(0, 2), (2, 3)]
    """
    starts = [i for i, module in enumerate(container) if isinstance(module, (nn.Linear, ConnectedLayer))]
    if not starts:
        raise ConfigError(f"{type(container).__name__} has no nn.Linear to split into layers")
    starts[0] = 0
    return list(zip(starts, [*starts[1:], len(container)]))


class SequentialSlice(nn.Module):
    """Runs ``container[start:stop]`` of a module another module owns: one hookable layer of a model's stack.

    The container is *borrowed*: kept as a plain attribute, not registered, so its parameters keep their names
    (``mlp.0.weight``), are saved once, and the slice itself has no parameters or state. Children are looked up by
    position at every call, so a child replaced in the container later (e.g. by Mixout) is the one that runs.
    Register the slice in the owner (e.g. in an ``nn.ModuleList``) so that ``train()``/``eval()`` reach it.

    Args:
        container: the ``nn.Sequential`` (or ``nn.ModuleList``) owned elsewhere.
        start, stop: the positions to run, ``0 <= start < stop <= len(container)``.

    Shapes:
        whatever ``container[start:stop]`` maps, e.g. ``(B, D_in) -> (B, D_out)``.

    Example:
        >>> mlp = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
        >>> first = SequentialSlice(mlp, 0, 2)
        >>> x = torch.randn(4, 2)
        >>> torch.equal(first(x), mlp[1](mlp[0](x))), len(list(first.parameters()))
        (True, 0)
    """

    container: nn.Sequential | nn.ModuleList  # set through __dict__ (borrowed), so declared here for type checkers

    def __init__(self, container: nn.Sequential | nn.ModuleList, start: int, stop: int) -> None:
        super().__init__()
        if not 0 <= start < stop <= len(container):
            raise ConfigError(f"slice [{start}, {stop}) is outside the container's range [0, {len(container)}]")
        self.__dict__["container"] = container  # borrowed: not registered (see the class docstring)
        self.start, self.stop = start, stop

    def forward(self, hidden: Any) -> Any:
        for position in range(self.start, self.stop):
            hidden = self.container[position](hidden)
        return hidden

    def extra_repr(self) -> str:
        return f"start={self.start}, stop={self.stop}"

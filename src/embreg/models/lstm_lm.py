"""An AWD-style LSTM language model built from :mod:`embreg.nn` blocks.

Reference: dropout-explicit-implicit-regularization.txt, Sec. 5.1 (the LSTM of Merity et al. with "node dropout on
the output, hidden, and embedding layers as well as DropConnect on the weight matrices") and nlp-best-practices.txt
("Recurrent dropout", "LSTM tricks": learned initial state, tied input/output embeddings, down-projection, global
gradient-norm clipping — the last lives in the trainer's ``clip_norm``). Index transforms on the input words and the
targets follow sse-stochastic-shared-embeddings.txt (SSE-SE, eq. 5; label-side SSE); the layer stack for LNSR follows
lnsr-noise-stability-bert.txt, Sec. 3.1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import ConfigError, EmbregError
from embreg.models.hidden_states import hidden_states_dict
from embreg.models.lstm_precision import run_lstm
from embreg.models.lstm_sequence import unrolled_lstm
from embreg.models.output import ModelOutput
from embreg.models.single_table import recipe_table
from embreg.models.step_key import step_key
from embreg.models.transform_sites import is_passed_through, present_transforms
from embreg.nn import DropoutSite, EmbeddingDropout, LockedDropout, TiedOutput, WeightDrop
from embreg.nn.connections import (
    CONNECTIONS,
    HighwayLayer,
    ResidualLayer,
    check_connection,
    dense_input,
)
from embreg.nn.layer_stack import LayerStack, check_layer_index
from embreg.registry import register

State = list[tuple[torch.Tensor, torch.Tensor]]
"""One ``(h, c)`` pair per layer, each ``(1, B, H_l)``."""


class LSTMLayer(nn.Module):
    """Layer ``l`` of the LM's layer stack: LSTM ``l`` (with its DropConnect) from a given state.

    A hookable view of ``rnns[index]``: the model's ``rnns`` list is borrowed (kept as a plain attribute, not
    registered), so parameter names and checkpoints are those of ``rnns``. The forward pass and the stack call the
    LSTMs through these views, so a hook on one (LNSR's dropout replay, LayerNoise) sees the layer's input.

    Args:
        rnns: the model's ``nn.ModuleList`` of :class:`~embreg.nn.WeightDrop`-wrapped single-layer LSTMs.
        index: ``l``, 0-based.

    Shapes:
        ``x (B, T, I_l)``, state ``(h, c)`` each ``(1, B, H_l)`` -> ``out (B, T, H_l)`` and the final ``(h, c)``.
    """

    rnns: nn.ModuleList  # set through __dict__ (borrowed), so declared here for type checkers

    def __init__(self, rnns: nn.ModuleList, index: int) -> None:
        super().__init__()
        self.__dict__["rnns"] = rnns  # borrowed: the parameters stay registered (and saved) under ``rnns``
        self.index = index

    def forward(
        self,
        x: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor],
        unroll: bool = False,
        twice_differentiable: bool = False,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``unroll``: run :func:`unrolled_lstm` on the (DropConnect-ed) weights instead of the fused kernel.
        ``twice_differentiable``: on CUDA, run the fused kernel without cuDNN, whose LSTM has no double backward
        (PyTorch's own CUDA LSTM kernels have one); nothing changes on the CPU."""
        rnn = cast(WeightDrop, self.rnns[self.index])  # the model wraps every LSTM in a WeightDrop
        if unroll:
            weights = {**dict(rnn.module.named_parameters()), **rnn.dropped_weights()}
            return unrolled_lstm(
                x,
                state,
                weights["weight_ih_l0"],
                weights["weight_hh_l0"],
                weights.get("bias_ih_l0"),
                weights.get("bias_hh_l0"),
            )
        if twice_differentiable and x.is_cuda:
            with torch.backends.cudnn.flags(enabled=False):
                return run_lstm(rnn, x, state)
        return run_lstm(rnn, x, state)

    def extra_repr(self) -> str:
        return f"index={self.index}"


class ConnectedLSTMLayer(LSTMLayer):
    """An :class:`LSTMLayer` with a residual or highway connection around it (nlp-best-practices.txt, "Layer
    connections"): its output is ``connection.connect(x, LSTM(x))``; the returned ``(h, c)`` is the LSTM's own.

    The connection is borrowed like ``rnns`` (its parameters are registered under the model's ``connections``).

    Shapes:
        ``x (B, T, I_l)`` -> ``out (B, T, H_l)`` and the final ``(h, c)``, each ``(1, B, H_l)``.
    """

    connection: ResidualLayer | HighwayLayer  # set through __dict__ (borrowed)

    def __init__(self, rnns: nn.ModuleList, index: int, connection: ResidualLayer | HighwayLayer) -> None:
        super().__init__(rnns, index)
        self.__dict__["connection"] = connection

    def forward(
        self,
        x: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor],
        unroll: bool = False,
        twice_differentiable: bool = False,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        out, new_state = super().forward(x, state, unroll, twice_differentiable)
        return self.connection.connect(x, out), new_state


class LSTMLanguageModelStack(LayerStack):
    """The layer stack of an :class:`LSTMLanguageModel` (lnsr-noise-stability-bert.txt, Sec. 3.1).

    ``h_0`` is the embedded words after the input (locked) dropout ``(B, T, E)``; layer ``l`` is LSTM ``l``
    followed, below the top layer, by the locked dropout between layers, so ``h_l`` ``(B, T, H_l)`` is the next
    layer's input and ``h_L`` is the last LSTM's output (before the output dropout); :meth:`predict` applies the
    output dropout, the optional projection and the decoder -> logits ``(B, T, V)``. With ``connections: dense``
    ``h_l`` is the concatenation ``[h_0; dropped outputs of layers 1..l]`` that layer ``l + 1`` reads; with
    ``residual`` / ``highway`` the connection is part of layer ``l`` (``l >= 2``).

    Recurrent state: the LM carries its state across BPTT windows, so layer ``l`` is run from the initial state the
    window's forward pass used for it (recorded by the forward pass, detached; the learned initial state when the
    window starts a stream). Run the model forward on the window first; the stack then re-runs that window.

    R3F and SMART compare ``(B, C)`` class logits; the LM's ``(B, T, V)`` logits make them raise a
    :class:`~embreg.errors.ConfigError` (LNSR compares the states and works).

    Example:
        >>> lm = LSTMLanguageModel.build(vocab_size=20, emb_dim=8, hidden_dim=8, layers=2).eval()
        >>> batch = {"input": torch.randint(0, 20, (2, 5)), "target": torch.randint(0, 20, (2, 5))}
        >>> out, stack = lm(batch), lm.layer_stack()
        >>> h = stack.clean_states(out)
        >>> stack.num_layers, torch.equal(stack.predict(stack.run(h[0], batch)[-1], batch), out.predictions)
        (2, True)
    """

    def __init__(self, model: LSTMLanguageModel) -> None:
        self.model = model
        self.num_layers = len(model.rnns)

    def layer(self, index: int) -> nn.Module:
        check_layer_index(index, self.num_layers)
        return self.model.stack_layers[index - 1]

    def run_layer(self, index: int, hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        model = self.model
        state = model.window_state(hidden.shape[0])[index - 1]
        grad = torch.is_grad_enabled()
        out, _ = model.stack_layers[index - 1](
            hidden, state, model.unroll and grad, model.twice_differentiable and grad
        )
        return model.next_input(hidden, out) if index < self.num_layers else out

    def predict(self, last_hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.model.decode(last_hidden)


class LSTMLanguageModel(nn.Module):
    """Word-level LSTM LM: embedding -> [locked dropout] -> LSTM layers with locked dropout between -> softmax.

    Dropout sites (all identity in eval mode, at probability 0 and under :func:`embreg.nn.dropout_disabled`):
    ``q_embedding`` drops whole word types of the embedding matrix, ``q_input`` / ``q_hidden`` / ``q_output`` are
    locked (one mask per sequence) on the embedded words, between layers and on the last layer's output, and
    ``q_weight`` is DropConnect on every hidden-to-hidden matrix.

    Batches are dicts with ``"input"`` and ``"target"`` ``(B, T)`` LongTensors. The LSTM state is carried across
    consecutive batches of one stream (truncated BPTT) when batches carry ``"index"`` (a step counter) and ``"reset"``
    (start again from the initial state): every forward pass of a batch starts from the state the *first* forward
    pass of the previous batch ended in (detached), so Dropout_k's k passes and a regulariser's extra clean pass all
    start from the same state. Without ``"index"`` each call starts from the initial state. :meth:`forward_sequence`
    is the stateless core used by evaluators.

    Index transforms (sse-stochastic-shared-embeddings.txt): ``input_transform`` maps the input ids and
    ``label_transform`` the target ids (e.g. :class:`embreg.sse.SSE` and :class:`embreg.sse.LabelSSE`), in training
    mode only. They are drawn once per step: every forward pass (and :meth:`loss`) of the same batch in one step --
    Dropout_k's k passes, the analytic regularisers' clean pass, a noisy pass -- sees the same swapped ids; a new
    step (a new ``"index"``, a new input tensor, or parameters changed by an optimizer step) draws anew. The ids the
    embedding looked up are in ``output.hidden["input_ids"]``, which :meth:`dropout_sites` uses.

    Layer stack (:meth:`layer_stack`, see :class:`LSTMLanguageModelStack`): ``forward`` returns the ``L + 1`` states
    ``hidden_states.<i>`` (``h_0`` the embedding output after its dropout, ``h_l`` each LSTM's output after the
    dropout between layers, ``h_L`` the last LSTM's output), so LNSR and LayerNoise work on the LM.

    Args:
        embedding: ``nn.Embedding(V, E)``, or a mixed-dimension table of ``V`` rows at base dimension ``E`` (tied, the
            softmax weight is its projected ``(V, E)`` matrix, :class:`~embreg.nn.TiedOutput`).
        rnns: one single-layer, batch-first ``nn.LSTM`` per layer; the first takes ``E`` inputs.
        q_embedding, q_input, q_hidden, q_output, q_weight: dropout probabilities in ``[0, 1)``.
        projection: optional module mapping the last layer's output to the decoder's input size (down-projection).
        tie: reuse ``embedding.weight`` as the softmax weight (then the decoder input size must be ``E``).
        learn_init: learn the initial ``(h, c)`` of every layer instead of zeros (nlp-best-practices.txt, "LSTM
            tricks": learning the initial state).
        connections: how the LSTM layers connect (nlp-best-practices.txt, "Layer connections";
            :mod:`embreg.nn.connections`): ``"none"`` (stacked), ``"residual"`` or ``"highway"`` around every
            layer above the first (a bias-free projection carries the input where the widths differ), or
            ``"dense"`` (layer ``l`` reads the embedded words and the outputs of all layers below it,
            ``rnns[l].input_size = E + H_0 + ... + H_{l-1}``). The between-layer dropout acts on each layer's
            (connected) output before the next layer reads it.
        unroll: while gradients are recorded, run each layer with :func:`unrolled_lstm` (the same function as
            ``nn.LSTM``) instead of the fused kernel. Slower for plain training, but the analytic dropout
            regularisers, which differentiate the backward pass, are much cheaper on its graph (the recipes turn it
            on for them). Evaluation under ``torch.no_grad`` always uses the fused kernel.
        twice_differentiable: a regulariser differentiates the backward pass through the fused kernel (xi_approx
            with dropout kept): on CUDA the layers then run without cuDNN, whose LSTM cannot be differentiated
            twice. No effect on the CPU or when ``unroll`` is on.
        input_transform: ids -> ids module applied to the input ids ``(B, T)`` in training (``None``: none).
        label_transform: ids -> ids module applied to the target ids ``(B, T)`` in :meth:`loss` in training
            (``None``: none).

    Example:
        >>> lm = LSTMLanguageModel.build(vocab_size=50, emb_dim=16, hidden_dim=32, layers=2, q_output=0.4)
        >>> batch = {"input": torch.randint(0, 50, (4, 10)), "target": torch.randint(0, 50, (4, 10))}
        >>> out = lm(batch)
        >>> out.predictions.shape, sorted(lm.dropout_sites(batch, out))
        (torch.Size([4, 10, 50]), ['embedding', 'hidden.0', 'input', 'output', 'weight_hh.0', 'weight_hh.1'])
        >>> lm.loss(batch, out).item() > 0
        True
    """

    @property
    def loss_is_mean_cross_entropy(self) -> bool:
        """:meth:`loss` is the mean cross-entropy of ``predictions`` against ``batch["target"]``; the dropout
        regularisers use this to form ``d loss / d logits`` directly (``(softmax - onehot) / N``). False while a
        label transform acts (training mode): the loss then reads swapped targets that ``batch`` does not hold."""
        return self.label_transform is None or not self.training

    def __init__(
        self,
        embedding: nn.Module,
        rnns: Sequence[nn.LSTM],
        *,
        q_embedding: float = 0.0,
        q_input: float = 0.0,
        q_hidden: float = 0.0,
        q_output: float = 0.0,
        q_weight: float = 0.0,
        projection: nn.Module | None = None,
        tie: bool = True,
        learn_init: bool = False,
        connections: str = "none",
        unroll: bool = False,
        twice_differentiable: bool = False,
        input_transform: nn.Module | None = None,
        label_transform: nn.Module | None = None,
    ) -> None:
        super().__init__()
        check_connection(connections)
        if not rnns:
            raise EmbregError("rnns is empty: the model needs at least one LSTM layer")
        for i, rnn in enumerate(rnns):
            if not isinstance(rnn, nn.LSTM) or rnn.num_layers != 1 or not rnn.batch_first or rnn.bidirectional:
                raise EmbregError(f"rnns[{i}] must be a single-layer, batch-first, unidirectional nn.LSTM, got {rnn}")
        emb_dim = int(cast(int, embedding.embedding_dim))
        _check_input_sizes(rnns, emb_dim, connections)
        self.vocab_size = int(cast(int, embedding.num_embeddings))
        self.embedding = EmbeddingDropout(embedding, q_embedding)
        self.input_dropout = LockedDropout(q_input)
        self.hidden_dropout = LockedDropout(q_hidden)
        self.output_dropout = LockedDropout(q_output)
        self.rnns = nn.ModuleList(WeightDrop(rnn, ["weight_hh_l0"], q_weight) for rnn in rnns)
        self.connection_kind = connections
        if connections in ("residual", "highway"):
            kind = ResidualLayer if connections == "residual" else HighwayLayer
            self.connections = nn.ModuleList(
                kind(None, rnns[layer - 1].hidden_size, rnns[layer].hidden_size) for layer in range(1, len(rnns))
            )
            self.stack_layers = nn.ModuleList(
                [LSTMLayer(self.rnns, 0)]
                + [
                    ConnectedLSTMLayer(
                        self.rnns, layer, cast(ResidualLayer | HighwayLayer, self.connections[layer - 1])
                    )
                    for layer in range(1, len(rnns))
                ]
            )
        else:
            self.stack_layers = nn.ModuleList(LSTMLayer(self.rnns, layer) for layer in range(len(rnns)))
        self.projection = projection
        decoder_in = rnns[-1].hidden_size
        if projection is not None:
            with torch.no_grad():
                decoder_in = projection(torch.zeros(1, decoder_in)).shape[-1]
        if tie:
            if decoder_in != emb_dim:
                raise EmbregError(
                    f"tie=True needs the decoder input size {decoder_in} to equal the embedding dim "
                    f"{emb_dim}; add a projection or set tie=False"
                )
            self.decoder: nn.Module = TiedOutput(embedding)
        else:
            self.decoder = nn.Linear(decoder_in, self.vocab_size)
        sizes = [rnn.hidden_size for rnn in rnns]
        self.init_h = nn.ParameterList(nn.Parameter(torch.zeros(1, 1, h), requires_grad=learn_init) for h in sizes)
        self.init_c = nn.ParameterList(nn.Parameter(torch.zeros(1, 1, h), requires_grad=learn_init) for h in sizes)
        self._carry: dict = {}
        self.unroll = unroll
        self.twice_differentiable = twice_differentiable
        self.input_transform = input_transform
        self.label_transform = label_transform
        self._drawn: dict[str, tuple] = {}  # "input"/"target" -> (source ids, step key, transformed ids)
        self._window: tuple[int, State | None] | None = None  # (B, initial state of the last forward; None: learned)

    @classmethod
    def build(
        cls,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        layers: int,
        *,
        proj_dim: int | None = None,
        tie: bool = True,
        init_range: float = 0.1,
        embedding: nn.Module | None = None,
        connections: str = "none",
        **kwargs,
    ) -> LSTMLanguageModel:
        """Builds the parts: ``nn.Embedding`` (uniform in ``+-init_range``), ``layers`` LSTMs, optional projection.

        The last LSTM has ``emb_dim`` units when the weights are tied and there is no projection (as in AWD-LSTM),
        else ``hidden_dim``; ``proj_dim`` adds a bias-free ``Linear(hidden_dim, proj_dim)`` before the softmax.
        ``embedding``: a table to use instead of the ``nn.Embedding`` (e.g. a
        :class:`~embreg.embeddings.MixedDimensionEmbedding` of ``vocab_size`` rows at ``emb_dim``; tied, the softmax
        reads its projected rows). ``connections``: see the class; with ``"dense"`` each LSTM is built as wide as
        the states it reads. Other keyword arguments (dropout probabilities, ``input_transform``,
        ``label_transform``, ...) go to the constructor.
        """
        if min(vocab_size, emb_dim, hidden_dim, layers) < 1:
            raise EmbregError(
                f"vocab_size={vocab_size}, emb_dim={emb_dim}, hidden_dim={hidden_dim}, layers={layers} must all be >= 1"
            )
        if embedding is None:
            embedding = nn.Embedding(vocab_size, emb_dim)
            nn.init.uniform_(embedding.weight, -init_range, init_range)
        elif (getattr(embedding, "num_embeddings", None), getattr(embedding, "embedding_dim", None)) != (
            vocab_size,
            emb_dim,
        ):
            raise EmbregError(
                f"the given embedding maps {getattr(embedding, 'num_embeddings', None)} ids to width "
                f"{getattr(embedding, 'embedding_dim', None)}; expected vocab_size={vocab_size}, emb_dim={emb_dim}"
            )
        last = emb_dim if tie and proj_dim is None else hidden_dim
        sizes = [hidden_dim] * (layers - 1) + [last]
        inputs = _input_sizes(emb_dim, sizes, check_connection(connections))
        rnns = [nn.LSTM(i, h, batch_first=True) for i, h in zip(inputs, sizes)]
        projection = nn.Linear(last, proj_dim, bias=False) if proj_dim is not None else None
        return cls(embedding, rnns, projection=projection, tie=tie, connections=connections, **kwargs)

    # ------------------------------------------------------------------------------------------------ state
    def initial_state(self, batch_size: int) -> State:
        """The initial ``(h, c)`` of every layer for ``batch_size`` streams (zeros, or learned)."""
        return [
            (h.expand(1, batch_size, -1).contiguous(), c.expand(1, batch_size, -1).contiguous())
            for h, c in zip(self.init_h, self.init_c)
        ]

    def _state_for(self, batch: dict[str, torch.Tensor]) -> State | None:
        if "index" not in batch:
            self._carry = {}
            return None
        index = int(batch["index"])
        reset = bool(batch["reset"]) if "reset" in batch else False
        if self._carry.get("index") == index:
            return self._carry["state_in"]
        previous = self._carry.get("state_out")
        width = batch["input"].shape[0]
        state = None if reset or previous is None or previous[0][0].shape[1] != width else previous
        self._carry = {"index": index, "state_in": state, "state_out": None}
        return state

    def reset_state(self) -> None:
        """Forget the carried state (the next batch starts from the initial state)."""
        self._carry = {}

    def window_state(self, batch_size: int) -> State:
        """The initial ``(h, c)`` of every layer that the last forward pass started from (for the layer stack).

        Raises:
            ConfigError: no forward pass has run yet, or it had another batch size.
        """
        if self._window is None:
            raise ConfigError(
                "the LSTM LM's layer stack re-runs the window of the last forward pass, and none has "
                "run yet: call the model on the batch first"
            )
        width, state = self._window
        if width != batch_size:
            raise ConfigError(
                f"the layer stack got {batch_size} sequences but the last forward pass ran {width}: "
                "the recurrent state of the window is only known for that batch"
            )
        return self.initial_state(batch_size) if state is None else state

    # --------------------------------------------------------------------------------------- index transforms
    def _step_ids(self, batch: dict[str, torch.Tensor], key: str, transform: nn.Module | None) -> torch.Tensor:
        """``transform(batch[key])``, drawn once per step in training (see the class docstring)."""
        ids = batch[key]
        if transform is None or is_passed_through(transform):
            return ids
        if not self.training:
            return transform(ids)  # identity in eval (the index-transform contract); still checks the ids
        step = step_key(batch, self)
        cached = self._drawn.get(key)
        if cached is not None and cached[0] is ids and cached[1] == step:
            return cached[2]
        drawn = transform(ids)
        self._drawn[key] = (ids, step, drawn)
        return drawn

    def step_targets(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The target ids ``(B, T)`` the loss uses this step: ``batch["target"]`` after the label transform."""
        return self._step_ids(batch, "target", self.label_transform)

    def index_transforms(self) -> list[nn.Module]:
        """The input and label transforms that are set (:mod:`embreg.models.transform_sites`)."""
        return present_transforms([self.input_transform, self.label_transform])

    def draw_index_transforms(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` with ``input`` and ``target`` as this training step draws them, on the batch's device
        (:mod:`embreg.models.transform_sites`)."""
        drawn = dict(batch)
        drawn["input"] = self._step_ids(batch, "input", self.input_transform)
        if "target" in batch:
            drawn["target"] = self._step_ids(batch, "target", self.label_transform)
        return drawn

    # ---------------------------------------------------------------------------------------------- forward
    def forward_sequence(self, tokens: torch.Tensor, state: State | None = None) -> tuple[ModelOutput, State]:
        """Runs ``tokens`` ``(B, T)`` from ``state`` (default: the initial state).

        Returns:
            ``ModelOutput(predictions=(B, T, V) logits, hidden={"input": (B, T, E), "hidden.<l>": (B, T, H),
            "output": (B, T, H_last), "hidden_states.<i>": the layer stack's states})`` (each dropout site taken
            *before* its dropout) and the final state.
        """
        if tokens.dim() != 2:
            raise EmbregError(f"tokens must be (B, T), got shape {tuple(tokens.shape)}")
        width = tokens.shape[0]
        self._window = (width, None if state is None else [(h.detach(), c.detach()) for h, c in state])
        if state is None:
            state = self.initial_state(width)
        emb = self.embedding(tokens)
        hidden = {"input": emb}
        x = self.input_dropout(emb)
        states = [x]
        new_state: State = []
        last = len(self.rnns) - 1
        unroll = self.unroll and torch.is_grad_enabled()
        twice = self.twice_differentiable and torch.is_grad_enabled()
        for layer, block in enumerate(self.stack_layers):
            out, (h, c) = block(x, state[layer], unroll, twice)
            new_state.append((h, c))
            if layer < last:
                hidden[f"hidden.{layer}"] = out
                x = self.next_input(x, out)
                states.append(x)
            else:
                hidden["output"] = out
                states.append(out)
        hidden.update(hidden_states_dict(states))
        return ModelOutput(predictions=self.decode(out), hidden=hidden), new_state

    def next_input(self, layer_input: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """What the next layer reads: the between-layer dropout of ``out``, concatenated after ``layer_input``
        with dense connections (``[x^1; ...; x^l; h^l]``)."""
        dropped = self.hidden_dropout(out)
        return dense_input([layer_input, dropped]) if self.connection_kind == "dense" else dropped

    def decode(self, last_output: torch.Tensor) -> torch.Tensor:
        """Output dropout, projection (if any) and decoder: logits ``(B, T, V)`` from the last LSTM's output."""
        x = self.output_dropout(last_output)
        if self.projection is not None:
            x = self.projection(x)
        return self.decoder(x)

    def layer_stack(self) -> LSTMLanguageModelStack:
        """The model's :class:`LSTMLanguageModelStack` (for LNSR and LayerNoise)."""
        return LSTMLanguageModelStack(self)

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        """Logits ``(B, T, V)`` for ``batch["input"]`` ``(B, T)``, carrying the state across batches (see class)."""
        first_pass = "index" in batch and self._carry.get("index") != int(batch["index"])
        tokens = self._step_ids(batch, "input", self.input_transform)
        output, state = self.forward_sequence(tokens, self._state_for(batch))
        if first_pass:
            self._carry["state_out"] = [(h.detach(), c.detach()) for h, c in state]
        output.hidden["input_ids"] = tokens
        return output

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Mean cross-entropy over the ``B * T`` predicted tokens, against :meth:`step_targets`."""
        logits = output.predictions
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), self.step_targets(batch).reshape(-1))

    def dropout_sites(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> dict[str, DropoutSite]:
        """The tensors of ``output``'s forward pass where this model's dropout acts, with its own mask sharing.

        ``embedding`` (word types, ``"token"``), ``input``, ``hidden.<l>``, ``output`` (``"locked"``) and
        ``weight_hh.<l>`` (the raw hidden-to-hidden matrices, ``"element"``).
        """
        emb = output.hidden["input"]
        ids = output.hidden.get("input_ids", batch["input"])  # the ids the embedding looked up (after transforms)
        sites = {
            "embedding": DropoutSite(emb, "token", ids=ids, num_rows=self.vocab_size),
            "input": DropoutSite(emb, "locked"),
        }
        for name, tensor in output.hidden.items():
            if name.startswith("hidden.") or name == "output":
                sites[name] = DropoutSite(tensor, "locked")
        for layer, rnn in enumerate(self.rnns):
            weight_hh = cast(WeightDrop, rnn).module.weight_hh_l0  # rnns holds WeightDrop-wrapped nn.LSTMs
            if not isinstance(weight_hh, torch.Tensor):
                raise EmbregError(f"rnns[{layer}].module.weight_hh_l0 is a {type(weight_hh).__name__}, not a tensor")
            sites[f"weight_hh.{layer}"] = DropoutSite(weight_hh, "element")
        return sites


def _input_sizes(emb_dim: int, sizes: list[int], connections: str) -> list[int]:
    """Each LSTM's input width: the previous layer's output, or with dense connections all states below it."""
    if connections == "dense":
        return [emb_dim + sum(sizes[:layer]) for layer in range(len(sizes))]
    return [emb_dim] + sizes[:-1]


def _check_input_sizes(rnns: Sequence[nn.LSTM], emb_dim: int, connections: str) -> None:
    expected = _input_sizes(emb_dim, [rnn.hidden_size for rnn in rnns], connections)
    for layer, (rnn, width) in enumerate(zip(rnns, expected)):
        if rnn.input_size != width:
            raise EmbregError(
                f"rnns[{layer}].input_size={rnn.input_size} must be {width} (embedding dim {emb_dim}, "
                f"connections={connections!r})"
            )


@dataclass
class LSTMDropoutConfig:
    """Dropout probability per site (dropout-explicit-implicit-regularization.txt, Sec. 5.1 uses 0.4 on input,
    hidden, output and weights)."""

    embedding: float = 0.0
    input: float = 0.4
    hidden: float = 0.4
    output: float = 0.4
    weight: float = 0.4

    def __post_init__(self) -> None:
        for name in ("embedding", "input", "hidden", "output", "weight"):
            value = getattr(self, name)
            if not 0 <= value < 1:
                raise ConfigError(f"model.dropout.{name}={value} is outside [0, 1)")


@dataclass
class LSTMLanguageModelConfig:
    """``model: {name: lstm-lm, emb_dim: 200, hidden_dim: 400, layers: 2, dropout: {...}}`` (AWD-style LSTM).

    Attributes:
        emb_dim, hidden_dim, layers: sizes (the last layer has ``emb_dim`` units when tied without projection).
        tie: tie input and output embeddings.
        proj_dim: down-projection before the softmax (``null``: none).
        learn_init: learn the initial LSTM state (nlp-best-practices.txt, "LSTM tricks").
        connections: layer connections between the LSTMs, ``none``, ``residual``, ``highway`` or ``dense``
            (nlp-best-practices.txt, "Layer connections"; needs ``layers >= 2``).
        init_range: embeddings start uniform in ``+-init_range``.
        dropout: probability per site; a regulariser that replaces dropout (``r-approx``) trains the model without
            it and reads these probabilities for its coefficients.
    """

    emb_dim: int = 200
    hidden_dim: int = 400
    layers: int = 2
    tie: bool = True
    proj_dim: int | None = None
    learn_init: bool = False
    init_range: float = 0.1
    dropout: LSTMDropoutConfig = field(default_factory=LSTMDropoutConfig)
    connections: Literal["none", "residual", "highway", "dense"] = "none"

    def __post_init__(self) -> None:
        for name in ("emb_dim", "hidden_dim", "layers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"model.{name}={getattr(self, name)} must be >= 1")
        if self.connections not in CONNECTIONS:
            raise ConfigError(f"model.connections={self.connections!r} is not one of {CONNECTIONS}")
        if self.connections != "none" and self.layers < 2:
            raise ConfigError(
                f"model.connections={self.connections!r} connects stacked LSTM layers, and model.layers="
                f"{self.layers} has none to connect; use layers >= 2 or connections: none"
            )

    def dropout_groups(self) -> dict[str, float]:
        """``{site group of LSTMLanguageModel: q}`` (a one-layer LSTM has no between-layer site)."""
        q = self.dropout
        groups = {
            "embedding": q.embedding,
            "input": q.input,
            "hidden": q.hidden,
            "output": q.output,
            "weight_hh": q.weight,
        }
        if self.layers == 1:
            groups.pop("hidden")
        return groups


@register(
    "model",
    "lstm-lm",
    config=LSTMLanguageModelConfig,
    tasks=("lm",),
    kinds=("token", "label"),
    embeddings=("uniform", "md"),
    provides=("dropout_sites", "layer_stack"),
    summary="AWD-style LSTM language model with locked, embedding and weight dropout",
    reference="dropout-explicit-implicit-regularization.txt, Sec. 5.1 and App. D.1",
)
def build_lstm_lm(config: LSTMLanguageModelConfig, context: Any) -> LSTMLanguageModel:
    """The LSTM LM; without dropout (and unrolled, which the analytic terms differentiate far faster) when a
    regulariser of the recipe replaces dropout, and twice differentiable on CUDA (no cuDNN) when one differentiates
    the backward pass.

    With ``embeddings: {name: md}`` the token table is mixed-dimension, blocked and sized by the tokens' training
    counts, rows ``N(0, init_range^2 / 3)`` (the variance of the uniform table's ``U(-init_range, init_range)``);
    its base dimension is the embedding width (``model.emb_dim``, or the plan's with ``embeddings.budget``), and the
    tied softmax reads its projected rows."""
    replaced = any(spec.entry.extra.get("replaces_dropout") for spec in context.recipe.regularizers)
    twice = any(spec.entry.extra.get("differentiates_backward") for spec in context.recipe.regularizers)
    q = config.dropout
    probs = dict(q_embedding=q.embedding, q_input=q.input, q_hidden=q.hidden, q_output=q.output, q_weight=q.weight)
    if replaced:
        probs = {key: 0.0 for key in probs}
    built = recipe_table(
        context, "token", config.emb_dim, init="normal", init_std=config.init_range / 3**0.5, model="lstm-lm"
    )
    embedding, emb_dim = (None, config.emb_dim) if built is None else (built[0], built[1].base_dim)
    return LSTMLanguageModel.build(
        context.num_ids("token"),
        emb_dim,
        config.hidden_dim,
        config.layers,
        proj_dim=config.proj_dim,
        tie=config.tie,
        init_range=config.init_range,
        learn_init=config.learn_init,
        connections=config.connections,
        unroll=replaced,
        twice_differentiable=twice,
        input_transform=context.transforms.get("token"),
        label_transform=context.transforms.get("label"),
        embedding=embedding,
        **probs,
    )

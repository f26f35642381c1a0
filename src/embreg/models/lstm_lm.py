"""An AWD-style LSTM language model built from :mod:`embreg.nn` blocks.

Reference: dropout-explicit-implicit-regularization.txt, Sec. 5.1 (the LSTM of Merity et al. with "node dropout on
the output, hidden, and embedding layers as well as DropConnect on the weight matrices") and nlp-best-practices.txt
("Recurrent dropout", "LSTM tricks": learned initial state, tied input/output embeddings, down-projection, global
gradient-norm clipping — the last lives in the trainer's ``clip_norm``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import EmbregError
from embreg.models.lstm_sequence import unrolled_lstm
from embreg.models.output import ModelOutput
from embreg.nn import DropoutSite, EmbeddingDropout, LockedDropout, TiedOutput, WeightDrop

State = list[tuple[torch.Tensor, torch.Tensor]]
"""One ``(h, c)`` pair per layer, each ``(1, B, H_l)``."""


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

    Args:
        embedding: ``nn.Embedding(V, E)``.
        rnns: one single-layer, batch-first ``nn.LSTM`` per layer; the first takes ``E`` inputs.
        q_embedding, q_input, q_hidden, q_output, q_weight: dropout probabilities in ``[0, 1)``.
        projection: optional module mapping the last layer's output to the decoder's input size (down-projection).
        tie: reuse ``embedding.weight`` as the softmax weight (then the decoder input size must be ``E``).
        learn_init: learn the initial ``(h, c)`` of every layer instead of zeros.
        unroll: while gradients are recorded, run each layer with :func:`unrolled_lstm` (the same function as
            ``nn.LSTM``) instead of the fused kernel. Slower for plain training, but the analytic dropout
            regularisers, which differentiate the backward pass, are much cheaper on its graph (the recipes turn it
            on for them). Evaluation under ``torch.no_grad`` always uses the fused kernel.

    Example:
        >>> lm = LSTMLanguageModel.build(vocab_size=50, emb_dim=16, hidden_dim=32, layers=2, q_output=0.4)
        >>> batch = {"input": torch.randint(0, 50, (4, 10)), "target": torch.randint(0, 50, (4, 10))}
        >>> out = lm(batch)
        >>> out.predictions.shape, sorted(lm.dropout_sites(batch, out))
        (torch.Size([4, 10, 50]), ['embedding', 'hidden.0', 'input', 'output', 'weight_hh.0', 'weight_hh.1'])
        >>> lm.loss(batch, out).item() > 0
        True
    """

    loss_is_mean_cross_entropy = True
    """:meth:`loss` is the mean cross-entropy of ``predictions`` against ``batch["target"]``; the dropout regularisers
    use this to form ``d loss / d logits`` directly (``(softmax - onehot) / N``)."""

    def __init__(
        self,
        embedding: nn.Embedding,
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
        unroll: bool = False,
    ) -> None:
        super().__init__()
        if not rnns:
            raise EmbregError("rnns is empty: the model needs at least one LSTM layer")
        for i, rnn in enumerate(rnns):
            if not isinstance(rnn, nn.LSTM) or rnn.num_layers != 1 or not rnn.batch_first or rnn.bidirectional:
                raise EmbregError(f"rnns[{i}] must be a single-layer, batch-first, unidirectional nn.LSTM, got {rnn}")
        if rnns[0].input_size != embedding.embedding_dim:
            raise EmbregError(f"rnns[0].input_size={rnns[0].input_size} must equal the embedding dim "
                              f"{embedding.embedding_dim}")
        self.vocab_size = embedding.num_embeddings
        self.embedding = EmbeddingDropout(embedding, q_embedding)
        self.input_dropout = LockedDropout(q_input)
        self.hidden_dropout = LockedDropout(q_hidden)
        self.output_dropout = LockedDropout(q_output)
        self.rnns = nn.ModuleList(WeightDrop(rnn, ["weight_hh_l0"], q_weight) for rnn in rnns)
        self.projection = projection
        decoder_in = rnns[-1].hidden_size
        if projection is not None:
            with torch.no_grad():
                decoder_in = projection(torch.zeros(1, decoder_in)).shape[-1]
        if tie:
            if decoder_in != embedding.embedding_dim:
                raise EmbregError(f"tie=True needs the decoder input size {decoder_in} to equal the embedding dim "
                                  f"{embedding.embedding_dim}; add a projection or set tie=False")
            self.decoder: nn.Module = TiedOutput(embedding)
        else:
            self.decoder = nn.Linear(decoder_in, self.vocab_size)
        sizes = [rnn.hidden_size for rnn in rnns]
        self.init_h = nn.ParameterList(nn.Parameter(torch.zeros(1, 1, h), requires_grad=learn_init) for h in sizes)
        self.init_c = nn.ParameterList(nn.Parameter(torch.zeros(1, 1, h), requires_grad=learn_init) for h in sizes)
        self._carry: dict = {}
        self.unroll = unroll

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
        **kwargs,
    ) -> LSTMLanguageModel:
        """Builds the parts: ``nn.Embedding`` (uniform in ``+-init_range``), ``layers`` LSTMs, optional projection.

        The last LSTM has ``emb_dim`` units when the weights are tied and there is no projection (as in AWD-LSTM),
        else ``hidden_dim``; ``proj_dim`` adds a bias-free ``Linear(hidden_dim, proj_dim)`` before the softmax.
        """
        if min(vocab_size, emb_dim, hidden_dim, layers) < 1:
            raise EmbregError(f"vocab_size={vocab_size}, emb_dim={emb_dim}, hidden_dim={hidden_dim}, layers={layers} "
                              "must all be >= 1")
        embedding = nn.Embedding(vocab_size, emb_dim)
        nn.init.uniform_(embedding.weight, -init_range, init_range)
        last = emb_dim if tie and proj_dim is None else hidden_dim
        sizes = [hidden_dim] * (layers - 1) + [last]
        inputs = [emb_dim] + sizes[:-1]
        rnns = [nn.LSTM(i, h, batch_first=True) for i, h in zip(inputs, sizes)]
        projection = nn.Linear(last, proj_dim, bias=False) if proj_dim is not None else None
        return cls(embedding, rnns, projection=projection, tie=tie, **kwargs)

    # ------------------------------------------------------------------------------------------------ state
    def initial_state(self, batch_size: int) -> State:
        """The initial ``(h, c)`` of every layer for ``batch_size`` streams (zeros, or learned)."""
        return [(h.expand(1, batch_size, -1).contiguous(), c.expand(1, batch_size, -1).contiguous())
                for h, c in zip(self.init_h, self.init_c)]

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

    # ---------------------------------------------------------------------------------------------- forward
    def forward_sequence(self, tokens: torch.Tensor, state: State | None = None) -> tuple[ModelOutput, State]:
        """Runs ``tokens`` ``(B, T)`` from ``state`` (default: the initial state).

        Returns:
            ``ModelOutput(predictions=(B, T, V) logits, hidden={"input": (B, T, E), "hidden.<l>": (B, T, H),
            "output": (B, T, H_last)})`` (each site taken *before* its dropout) and the final state.
        """
        if tokens.dim() != 2:
            raise EmbregError(f"tokens must be (B, T), got shape {tuple(tokens.shape)}")
        if state is None:
            state = self.initial_state(tokens.shape[0])
        emb = self.embedding(tokens)
        hidden = {"input": emb}
        x = self.input_dropout(emb)
        new_state: State = []
        last = len(self.rnns) - 1
        unroll = self.unroll and torch.is_grad_enabled()
        for layer, rnn in enumerate(self.rnns):
            if unroll:
                weights = {**dict(rnn.module.named_parameters()), **rnn.dropped_weights()}
                out, (h, c) = unrolled_lstm(x, state[layer], weights["weight_ih_l0"], weights["weight_hh_l0"],
                                            weights.get("bias_ih_l0"), weights.get("bias_hh_l0"))
            else:
                out, (h, c) = rnn(x, state[layer])
            new_state.append((h, c))
            if layer < last:
                hidden[f"hidden.{layer}"] = out
                x = self.hidden_dropout(out)
            else:
                hidden["output"] = out
                x = self.output_dropout(out)
        if self.projection is not None:
            x = self.projection(x)
        return ModelOutput(predictions=self.decoder(x), hidden=hidden), new_state

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        """Logits ``(B, T, V)`` for ``batch["input"]`` ``(B, T)``, carrying the state across batches (see class)."""
        first_pass = "index" in batch and self._carry.get("index") != int(batch["index"])
        output, state = self.forward_sequence(batch["input"], self._state_for(batch))
        if first_pass:
            self._carry["state_out"] = [(h.detach(), c.detach()) for h, c in state]
        return output

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Mean cross-entropy over the ``B * T`` predicted tokens."""
        logits = output.predictions
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["target"].reshape(-1))

    def dropout_sites(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> dict[str, DropoutSite]:
        """The tensors of ``output``'s forward pass where this model's dropout acts, with its own mask sharing.

        ``embedding`` (word types, ``"token"``), ``input``, ``hidden.<l>``, ``output`` (``"locked"``) and
        ``weight_hh.<l>`` (the raw hidden-to-hidden matrices, ``"element"``).
        """
        emb = output.hidden["input"]
        sites = {"embedding": DropoutSite(emb, "token", ids=batch["input"], num_rows=self.vocab_size),
                 "input": DropoutSite(emb, "locked")}
        for name, tensor in output.hidden.items():
            if name.startswith("hidden.") or name == "output":
                sites[name] = DropoutSite(tensor, "locked")
        for layer, rnn in enumerate(self.rnns):
            sites[f"weight_hh.{layer}"] = DropoutSite(rnn.module.weight_hh_l0, "element")
        return sites

"""SASRec and SSE-PT: causal self-attention over a user's item sequence, for next-item recommendation.

References:
    Kang & McAuley 2018, "Self-Attentive Sequential Recommendation" (SASRec), Sec. III: item + learned position
    embeddings, stacked blocks of causal self-attention and a position-wise feed-forward network with residual
    connections, layer normalisation and dropout, a shared item embedding as the output layer, and the binary
    cross-entropy loss with one sampled negative per position.
    Wu, Cai, Zhang, Ge & Hsieh 2020, "SSE-PT: Sequential Recommendation Via Personalized Transformer": a user
    embedding concatenated with the item embedding at every position and in the output layer.
    sse-stochastic-shared-embeddings.txt, Sec. 3.2 (eq. 5, SSE-SE) and Sec. 4.2 / Table 4: SSE on the input item
    ids (``p_x``), the target item ids (``p_y``) and the user ids of SASRec / SSE-PT. The model only takes
    ids -> ids modules (``item_transform``, ``label_transform``, ``user_transform``) and has no SSE-specific code.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from embreg.errors import ConfigError, DataError
from embreg.models.hidden_states import hidden_states_dict
from embreg.models.output import ModelOutput
from embreg.models.sasrec_block import NORM_PLACEMENTS, SASRecBlock
from embreg.models.sasrec_stack import SASRecStack
from embreg.models.single_table import recipe_table
from embreg.models.step_key import step_key
from embreg.models.transform_sites import is_passed_through, present_transforms
from embreg.nn.tied_output import embedding_matrix
from embreg.registry import register

__all__ = ["SASRec", "SASRecBlock", "SASRecConfig", "build_sasrec"]

EMBEDDING_SCALES = ("sqrt_dim", "none")
POSITION_ORIGINS = ("end", "start")


@dataclass
class SASRecConfig:
    """``model: {name: sasrec, dim: 50, user_dim: 0, blocks: 2, heads: 1, dropout: 0.2, loss: bce}``.

    Attributes:
        dim: width of the item embedding.
        user_dim: ``> 0`` makes the model SSE-PT: a user embedding of this width is concatenated with the item
            embedding at every position (and in the output layer), so the hidden width is ``dim + user_dim``.
            ``0``: plain SASRec (no user embedding).
        blocks: number of self-attention blocks.
        heads: attention heads; must divide the hidden width ``dim + user_dim``.
        dropout: dropout probability on the embedded input, the attention weights and in the feed-forward network.
        loss: ``bce`` (the original SASRec: one sampled negative per position, ``batch["neg"]``) or ``ce`` (full
            softmax cross-entropy over every item, RecBole's default).
        init_std: a float: ``N(0, init_std^2)`` initialisation of the embedding tables and linear weights
            (RecBole and BERT use 0.02, the default: it is the one RecBole design choice that raises validation
            NDCG@10 over the original SASRec's, docs/results/sasrec-vs-recbole); ``None``: Xavier-normal for them
            instead, as the original SASRec implementations. Biases start at 0, layer norms at (1, 0), and the
            padding row of the item table is 0.
        norm: where each block's layer norms sit (:class:`~embreg.models.sasrec_block.SASRecBlock`): ``pre``
            (SASRec: on the query and the feed-forward input, and a final layer norm after the last block) or
            ``post`` (the Transformer's, BERT's and RecBole's: on each residual sum, no final layer norm).
        embedding_norm: a layer norm on the embedded input (items + positions), before its dropout (BERT, RecBole).
        embedding_scale: ``sqrt_dim`` multiplies the item vectors by ``sqrt(dim)`` before the positions are added
            (SASRec, after the Transformer, Vaswani et al. 2017 Sec. 3.4); ``none`` adds them as they are (RecBole).
        positions: which learned position an item gets. ``end``: the newest item has position ``max_len - 1``
            whatever the sequence's length (so left padding changes nothing); ``start``: the oldest item of the
            (cut) sequence has position 0, the next 1, and so on (RecBole, which pads on the right).
    """

    dim: int = 50
    user_dim: int = 0
    blocks: int = 2
    heads: int = 1
    dropout: float = 0.2
    loss: Literal["bce", "ce"] = "bce"
    init_std: float | None = 0.02
    norm: Literal["pre", "post"] = "pre"
    embedding_norm: bool = False
    embedding_scale: Literal["sqrt_dim", "none"] = "sqrt_dim"
    positions: Literal["end", "start"] = "end"

    def __post_init__(self) -> None:
        for name, low in (("dim", 1), ("user_dim", 0), ("blocks", 1), ("heads", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"model.{name}={value!r} must be an int >= {low}")
        hidden = self.dim + self.user_dim
        if hidden % self.heads:
            raise ConfigError(
                f"model.heads={self.heads} must divide the hidden width dim + user_dim = {hidden}; "
                "change model.heads, model.dim or model.user_dim"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"model.dropout={self.dropout} is outside [0, 1)")
        if self.loss not in ("bce", "ce"):
            raise ConfigError(f"model.loss={self.loss!r} must be 'bce' (sampled negatives) or 'ce' (full softmax)")
        if self.init_std is not None and not self.init_std > 0:
            raise ConfigError(f"model.init_std={self.init_std} must be > 0 (or null for Xavier-normal)")
        for name, allowed in (
            ("norm", NORM_PLACEMENTS),
            ("embedding_scale", EMBEDDING_SCALES),
            ("positions", POSITION_ORIGINS),
        ):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"model.{name}={getattr(self, name)!r} must be one of {', '.join(allowed)}")
        if not isinstance(self.embedding_norm, bool):
            raise ConfigError(f"model.embedding_norm={self.embedding_norm!r} must be true or false")


class SASRec(nn.Module):
    """SASRec (``user_dim = 0``) and SSE-PT (``user_dim > 0``) over left-padded item sequences.

    Ids: items ``0..num_items-1``, users ``0..num_users-1``; ``PAD = num_items`` pads every ``(B, L)`` item tensor
    on the left (the newest item is at position ``L - 1``), ``L <= max_len``.

    Input at position ``l``: ``e_l = [item_emb(s_l) * c; user_emb(u)] + pos_emb(p_l)`` (the user part for SSE-PT
    only; ``c = sqrt(dim)`` or 1, ``config.embedding_scale``), then a layer norm (``config.embedding_norm``),
    dropout, and padded positions set to 0. With ``config.positions = "end"`` a ``(B, L)`` input uses the last
    ``L`` of the ``max_len`` learned positions, so the newest item always has position ``max_len - 1``; with
    ``"start"`` the oldest non-padded item has position 0. Either way a sequence gives the same states however much
    left padding it has. Then ``blocks`` :class:`~embreg.models.sasrec_block.SASRecBlock` layers (pre-LN or post-LN,
    ``config.norm``), each followed by zeroing the padded positions, and for pre-LN a final layer norm, give the
    states ``F_l``. Position ``l`` attends to the non-padded positions ``<= l`` (and to itself, so no row of the
    mask is empty): changing a later item never changes an earlier state.

    Output: the score of item ``j`` after position ``l`` is ``<F_l, out(j)>`` with ``out(j) = item_emb(j)``
    (SASRec) or ``[item_emb(j); user_emb(u)]`` (SSE-PT); the item table is shared by input and output, and its
    padding row ``PAD`` is zero and never trained nor scored. A given ``item_embedding`` (e.g. a
    :class:`~embreg.embeddings.MixedDimensionEmbedding` of ``num_items`` rows) has no ``PAD`` row: ``PAD`` entries
    get zero vectors, and the output reads every item's projected row (:meth:`item_matrix`).

    Layer stack (:meth:`layer_stack`, :class:`~embreg.models.sasrec_stack.SASRecStack`): ``forward`` returns the
    ``blocks + 1`` states ``hidden_states.<i>`` (the embedded input entering block 1, then each block's output), so
    LNSR, R3F and SMART run on the blocks.

    Losses, at the positions whose target is not ``PAD``: ``bce`` (Kang & McAuley): mean of
    ``-log sigmoid(s_pos) - log(1 - sigmoid(s_neg))`` with one sampled negative ``batch["neg"]`` per position;
    ``ce``: mean softmax cross-entropy over all ``num_items`` items (the user term of SSE-PT's score is the same
    for every item and cancels in the softmax, so it is left out there).

    Index transforms (ids -> ids modules, e.g. :class:`embreg.sse.SSE`), in training mode only and only on the
    non-``PAD`` entries: ``item_transform`` on the input items (SSE-SE's ``p_x``), ``label_transform`` on the
    targets (``p_y``), ``user_transform`` on the user ids (SSE-PT only). Negatives are not transformed (they are
    uniform draws already). Each is drawn once per step: every forward pass and :meth:`loss` of the same batch
    tensors in one step sees the same swapped ids (a new step, a new tensor or an optimizer step draws anew).

    Args:
        num_items: number of items (the item table has ``num_items + 1`` rows, the last one ``PAD``).
        num_users: number of users (used when ``config.user_dim > 0``).
        max_len: number of learned positions, the longest input ``L``.
        config: sizes, dropout, loss and initialisation (default :class:`SASRecConfig`).
        user_transform, item_transform, label_transform: the index transforms (``None``: none).
        item_embedding: the item table over the ``num_items`` real items, ids ``(...) -> (..., dim)`` (``None``: an
            ``nn.Embedding(num_items + 1, dim)`` with the ``PAD`` row, initialised as ``config.init_std`` says).

    Batch (training): ``user (B,)``, ``input (B, L)``, ``target (B, L)`` (``PAD`` where there is no target) and,
    for ``bce``, ``neg (B, L)``. :meth:`score_next` takes ``user`` and ``input``.

    Shapes:
        ``forward`` -> ``ModelOutput(predictions=F (B, L, D), hidden={"input_ids": (B, L) ids looked up, "valid":
        (B, L) bool non-PAD inputs, "user_vectors": (B, user_dim) (SSE-PT only)})`` with ``D = dim + user_dim``;
        :meth:`loss` -> scalar; :meth:`score_next` -> ``(B, num_items)``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> model = SASRec(num_items=6, num_users=3, max_len=4, config=SASRecConfig(dim=8, user_dim=4, heads=2))
        >>> pad = model.pad
        >>> batch = {
        ...     "user": torch.tensor([0, 2]),
        ...     "input": torch.tensor([[pad, 1, 2, 3], [0, 4, 5, 1]]),
        ...     "target": torch.tensor([[pad, 2, 3, 4], [4, 5, 1, 2]]),
        ...     "neg": torch.tensor([[pad, 0, 5, 1], [3, 2, 0, 5]]),
        ... }
        >>> out = model(batch)
        >>> out.predictions.shape, model.loss(batch, out).item() > 0
        (torch.Size([2, 4, 12]), True)
        >>> model.score_next({"user": batch["user"], "input": batch["input"]}).shape
        torch.Size([2, 6])
    """

    def __init__(
        self,
        num_items: int,
        num_users: int,
        max_len: int,
        config: SASRecConfig | None = None,
        *,
        user_transform: nn.Module | None = None,
        item_transform: nn.Module | None = None,
        label_transform: nn.Module | None = None,
        item_embedding: nn.Module | None = None,
    ) -> None:
        super().__init__()
        config = SASRecConfig() if config is None else config
        if num_items < 1 or max_len < 1:
            raise ConfigError(f"num_items={num_items} and max_len={max_len} must be >= 1")
        if config.user_dim > 0 and num_users < 1:
            raise ConfigError(f"SSE-PT (model.user_dim={config.user_dim}) needs num_users >= 1, got {num_users}")
        if user_transform is not None and config.user_dim == 0:
            raise ConfigError(
                "a user index transform was given but SASRec has no user embedding: set model.user_dim > 0 "
                "(SSE-PT) or remove index_transforms.user"
            )
        self.config = config
        self.num_items, self.num_users, self.max_len = num_items, num_users, max_len
        self.pad = num_items
        self.dim, self.user_dim = config.dim, config.user_dim
        self.hidden_dim = config.dim + config.user_dim
        self.dropout = config.dropout
        if item_embedding is None:
            item_embedding = nn.Embedding(num_items + 1, config.dim, padding_idx=self.pad)
        else:
            _check_item_table(item_embedding, num_items, config.dim)
        self.item_embedding = item_embedding
        # an item table of its own (nn.Embedding with a PAD row) or a given one over the real items only
        self.padded_table = isinstance(item_embedding, nn.Embedding) and item_embedding.padding_idx == self.pad
        self.user_embedding = nn.Embedding(num_users, config.user_dim) if config.user_dim > 0 else None
        self.position_embedding = nn.Embedding(max_len, self.hidden_dim)
        self.blocks = nn.ModuleList(
            SASRecBlock(self.hidden_dim, config.heads, config.dropout, config.norm) for _ in range(config.blocks)
        )
        # a post-LN block ends with a layer norm already; the pre-LN stack needs its own after the last block
        self.final_norm = nn.LayerNorm(self.hidden_dim, eps=1e-8) if config.norm == "pre" else nn.Identity()
        self.embedding_norm = nn.LayerNorm(self.hidden_dim, eps=1e-8) if config.embedding_norm else None
        self.embedding_scale = math.sqrt(config.dim) if config.embedding_scale == "sqrt_dim" else 1.0
        self.user_transform = user_transform
        self.item_transform = item_transform
        self.label_transform = label_transform
        self._drawn: dict[str, tuple] = {}  # batch key -> (source ids, step key, transformed ids)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialises as :attr:`SASRecConfig.init_std` says (Xavier-normal or normal weights, zero biases)."""
        std = self.config.init_std
        given_table = set() if self.padded_table else {id(m) for m in self.item_embedding.modules()}
        for module in self.modules():
            if id(module) in given_table:  # a given item table keeps the initialisation it was built with
                continue
            if isinstance(module, (nn.Linear, nn.Embedding)):
                if std is None:
                    nn.init.xavier_normal_(module.weight)
                else:
                    nn.init.normal_(module.weight, std=std)
                if isinstance(module, nn.Linear) and module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        if self.padded_table:
            with torch.no_grad():
                embedding_matrix(self.item_embedding)[self.pad].zero_()

    # ------------------------------------------------------------------------------------------- item table
    def item_vectors(self, items: torch.Tensor) -> torch.Tensor:
        """Item vectors ``(..., dim)`` of item ids ``(...)``; ``PAD`` entries get zeros.

        A given item table (e.g. mixed dimensions) has no ``PAD`` row: its ``PAD`` entries look up item 0 and are
        zeroed, so they neither contribute nor receive gradient.
        """
        if self.padded_table:
            return self.item_embedding(items)
        pad = items == self.pad
        vectors = self.item_embedding(items.masked_fill(pad, 0))
        return vectors * (~pad).unsqueeze(-1).to(vectors.dtype)

    def item_matrix(self) -> torch.Tensor:
        """Every item's output vector ``(num_items, dim)`` (no ``PAD`` row), differentiable: the uniform table's
        rows, or a mixed-dimension table's projected rows ``E_i[j] @ P_i`` (computed once per call)."""
        full = embedding_matrix(self.item_embedding)
        return full[: self.num_items] if self.padded_table else full

    # --------------------------------------------------------------------------------------- index transforms
    def _step_ids(self, batch: dict[str, torch.Tensor], key: str, transform: nn.Module | None) -> torch.Tensor:
        """``batch[key]`` with ``transform`` applied to its non-PAD entries, in training, drawn once per step."""
        ids = batch[key]
        if transform is None or not self.training or is_passed_through(transform):
            return ids
        step = step_key(batch, self)
        cached = self._drawn.get(key)
        if cached is not None and cached[0] is ids and cached[1] == step:
            return cached[2]
        if key == "user":
            drawn = transform(ids)
        else:
            mask = ids != self.pad
            drawn = ids.clone()
            drawn[mask] = transform(ids[mask])
        self._drawn[key] = (ids, step, drawn)
        return drawn

    def step_targets(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The target ids ``(B, L)`` the loss uses this step: ``batch["target"]`` after the label transform."""
        return self._step_ids(batch, "target", self.label_transform)

    def index_transforms(self) -> list[nn.Module]:
        """The item, user and label transforms that are set (:mod:`embreg.models.transform_sites`)."""
        return present_transforms([self.item_transform, self.user_transform, self.label_transform])

    def draw_index_transforms(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` with ``input``, ``user`` (SSE-PT) and ``target`` as this training step draws them, on the
        batch's device (:mod:`embreg.models.transform_sites`)."""
        drawn = dict(batch)
        drawn["input"] = self._step_ids(batch, "input", self.item_transform)
        if self.user_embedding is not None and "user" in batch:
            drawn["user"] = self._step_ids(batch, "user", self.user_transform)
        if "target" in batch:
            drawn["target"] = self._step_ids(batch, "target", self.label_transform)
        return drawn

    # ---------------------------------------------------------------------------------------------- forward
    def _check_items(self, items: torch.Tensor) -> None:
        if items.dim() != 2:
            raise DataError(f"batch['input'] must be (B, L) item ids, got shape {tuple(items.shape)}")
        if items.shape[1] > self.max_len:
            raise DataError(
                f"batch['input'] has {items.shape[1]} positions but the model has max_len={self.max_len}; "
                "keep the last max_len items of each sequence (data.max_len)"
            )

    def encode(self, items: torch.Tensor, users: torch.Tensor | None = None, train: bool = False) -> torch.Tensor:
        """States ``F (B, L, D)`` of item ids ``(B, L)`` (PAD-padded) for user ids ``(B,)`` (SSE-PT; ignored by
        SASRec), as they are (no transforms); ``train`` turns dropout on."""
        return self._encode(items, self._user_vectors(users), train)

    def _user_vectors(self, users: torch.Tensor | None) -> torch.Tensor | None:
        if self.user_embedding is None:
            return None
        if users is None:
            raise DataError("SSE-PT (model.user_dim > 0) needs batch['user'] (B,) user ids")
        return self.user_embedding(users)

    def attention_mask(self, items: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The blocks' boolean attention mask ``(B, 1, L, L)`` (query ``l`` may attend to key ``j``: ``j <= l`` and
        not ``PAD``, or ``j == l``) and the ``keep`` factor ``(B, L, 1)`` (0 at ``PAD`` inputs) of item ids ``(B, L)``."""
        length = items.shape[1]
        valid = items != self.pad  # (B, L)
        causal = torch.ones(length, length, dtype=torch.bool, device=items.device).tril_()
        eye = torch.eye(length, dtype=torch.bool, device=items.device)
        mask = (causal & valid.unsqueeze(1) | eye).unsqueeze(1)
        return mask, valid.unsqueeze(-1).to(dtype)

    def position_vectors(self, items: torch.Tensor) -> torch.Tensor:
        """The learned position vectors added to item ids ``(B, L)``: ``(L, D)`` (``positions="end"``: the last ``L``
        positions) or ``(B, L, D)`` (``"start"``: position ``k`` for the ``k``-th non-padded item, 0 at padding)."""
        if self.config.positions == "end":
            return self.position_embedding.weight[self.max_len - items.shape[1] :]
        order = (items != self.pad).long().cumsum(dim=1) - 1
        return self.position_embedding(order.clamp_min(0))

    def _encode(
        self,
        items: torch.Tensor,
        user_vectors: torch.Tensor | None,
        train: bool,
        states: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """States ``F`` ``(B, L, D)``; ``states`` (if given) receives the layer stack's ``h_0..h_L``."""
        self._check_items(items)
        batch, length = items.shape
        x = self.item_vectors(items) * self.embedding_scale
        if user_vectors is not None:
            x = torch.cat([x, user_vectors.unsqueeze(1).expand(batch, length, self.user_dim)], dim=-1)
        x = x + self.position_vectors(items)
        if self.embedding_norm is not None:
            x = self.embedding_norm(x)
        mask, keep = self.attention_mask(items, x.dtype)
        x = F.dropout(x, self.dropout, train) * keep
        if states is not None:
            states.append(x)
        for block in self.blocks:
            x = block(x, mask, train) * keep
            if states is not None:
                states.append(x)
        return self.final_norm(x)

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        """States ``(B, L, D)`` of ``batch["input"]`` (after the item transform) for ``batch["user"]``."""
        items = self._step_ids(batch, "input", self.item_transform)
        hidden: dict[str, torch.Tensor] = {"input_ids": items, "valid": items != self.pad}
        user_vectors = None
        if self.user_embedding is not None:
            if "user" not in batch:
                raise DataError("SSE-PT (model.user_dim > 0) needs batch['user'] (B,) user ids")
            user_vectors = self.user_embedding(self._step_ids(batch, "user", self.user_transform))
            hidden["user_vectors"] = user_vectors
        layer_states: list[torch.Tensor] = []
        states = self._encode(items, user_vectors, self.training, layer_states)
        hidden.update(hidden_states_dict(layer_states))
        return ModelOutput(predictions=states, hidden=hidden)

    def step_inputs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The input ids ``(B, L)`` the forward pass reads this step: ``batch["input"]`` after the item transform."""
        return self._step_ids(batch, "input", self.item_transform)

    def layer_stack(self) -> SASRecStack:
        """The blocks as a layer stack (:class:`~embreg.models.sasrec_stack.SASRecStack`; LNSR, R3F, SMART).

        Example:
            >>> model = SASRec(num_items=6, num_users=0, max_len=4, config=SASRecConfig(dim=8, heads=2)).eval()
            >>> batch = {"input": torch.tensor([[model.pad, 1, 2, 3], [0, 4, 5, 1]])}
            >>> out, stack = model(batch), model.layer_stack()
            >>> h = stack.clean_states(out)
            >>> stack.num_layers, torch.equal(stack.predict(stack.run(h[0], batch)[-1], batch), out.predictions)
            (2, True)
        """
        return SASRecStack(self)

    def _user_term(self, states: torch.Tensor, output: ModelOutput) -> torch.Tensor | None:
        """``<F_l[dim:], user_emb(u)>`` ``(B, L)`` (SSE-PT's user part of every score), or None for SASRec."""
        if self.user_embedding is None:
            return None
        return (states[..., self.dim :] * output.hidden["user_vectors"].unsqueeze(1)).sum(-1)

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Mean ``bce`` or ``ce`` loss over the positions whose target is not PAD (see the class docstring)."""
        states = output.predictions
        targets = self.step_targets(batch)
        valid = targets != self.pad
        item_states = states[..., : self.dim]
        if self.config.loss == "ce":
            logits = item_states[valid] @ self.item_matrix().T  # (N, num_items)
            return F.cross_entropy(logits, targets[valid])
        if "neg" not in batch:
            raise DataError("loss 'bce' needs batch['neg'] (B, L): one sampled negative item per target position")
        pos = (item_states * self.item_vectors(targets)).sum(-1)  # (B, L)
        neg = (item_states * self.item_vectors(batch["neg"])).sum(-1)
        user_term = self._user_term(states, output)
        if user_term is not None:
            pos, neg = pos + user_term, neg + user_term
        per_position = -F.logsigmoid(pos) - F.logsigmoid(-neg)
        weights = valid.to(per_position.dtype)
        return (per_position * weights).sum() / weights.sum().clamp_min(1.0)

    @torch.no_grad()
    def score_next(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Scores ``(B, num_items)`` of every item after the last position ``L - 1`` of ``batch["input"]``, for
        ``batch["user"]``: ``<F_{L-1}, out(j)>``; no transforms, no dropout."""
        user_vectors = self._user_vectors(batch.get("user"))
        last = self._encode(batch["input"], user_vectors, train=False)[:, -1]  # (B, D)
        scores = last[:, : self.dim] @ self.item_matrix().T
        if user_vectors is not None:
            scores = scores + (last[:, self.dim :] * user_vectors).sum(-1, keepdim=True)
        return scores


def _check_item_table(table: nn.Module, num_items: int, dim: int) -> None:
    """Raises :class:`ConfigError` unless ``table`` maps ``num_items`` item ids to ``dim``-wide vectors."""
    rows, width = getattr(table, "num_embeddings", None), getattr(table, "embedding_dim", None)
    if rows != num_items or width != dim:
        raise ConfigError(
            f"the item table has {rows} rows of width {width}; SASRec needs {num_items} rows (one per item, no PAD "
            f"row) of width model.dim={dim}"
        )


@register(
    "model",
    "sasrec",
    config=SASRecConfig,
    tasks=("next-item",),
    kinds=("user", "item", "label"),
    kinds_for=lambda config: ("user", "item", "label") if config.user_dim > 0 else ("item", "label"),
    kinds_hint={"user": "user ids need a user embedding: set model.user_dim > 0 (SSE-PT)"},
    embeddings=("uniform", "md"),
    provides=("layer_stack",),
    summary="SASRec / SSE-PT: causal self-attention over the item sequence (user embedding with user_dim > 0)",
    reference="Kang & McAuley 2018, Sec. III; sse-stochastic-shared-embeddings.txt, Sec. 4.2 / Table 4 (SSE-PT)",
)
def build_sasrec(config: SASRecConfig, context: Any) -> SASRec:
    """:class:`SASRec` over the task's items and users, ``data.max_len`` positions and the recipe's transforms.

    With ``embeddings: {name: md}`` the item table is mixed-dimension, blocked and sized by the items' training
    counts; it serves the input and, through its projected rows, the output scores; its base dimension is the
    item width (``model.dim``, or the plan's with ``embeddings.budget``). The user table of SSE-PT stays uniform.
    """
    user_transform = context.transforms.get("user")
    if user_transform is not None and config.user_dim == 0:
        raise ConfigError(
            "index_transforms.user needs a user embedding, which SASRec has not: set model.user_dim > 0 (SSE-PT)"
        )
    init: Literal["normal", "xavier_uniform"] = "xavier_uniform" if config.init_std is None else "normal"
    built = recipe_table(context, "item", config.dim, init=init, init_std=config.init_std or 1.0, model="sasrec")
    item_table = None
    if built is not None:
        item_table, plan = built
        if plan.base_dim != config.dim:
            hidden = plan.base_dim + config.user_dim
            if hidden % config.heads:
                raise ConfigError(
                    f"the mixed-dimension item table's base dimension is {plan.base_dim}, so the hidden width is "
                    f"{hidden}, which model.heads={config.heads} does not divide; set embeddings.max_dim or "
                    "model.heads"
                )
            config = dataclasses.replace(config, dim=plan.base_dim)
    return SASRec(
        context.num_ids("item"),
        context.num_ids("user"),
        int(context.recipe.data.max_len),
        config,
        user_transform=user_transform,
        item_transform=context.transforms.get("item"),
        label_transform=context.transforms.get("label"),
        item_embedding=item_table,
    )

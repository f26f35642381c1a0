"""Neural collaborative filtering (GMF + MLP) for explicit ratings, with any user/item embedding modules.

References: mixed-dimension-embeddings.txt, Sec. V ("Case Study: Collaborative Filtering") and Appendix H
("for the NCF model, we use a 3-layer MLP with hidden layer dimensions 128-128-32 ... default LeakyReLU
activations"); the GMF + MLP fusion is the NeuMF design of the NCF paper cited there ([26]).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.models.hidden_states import hidden_states_dict
from embreg.models.mlp import mlp
from embreg.models.output import ModelOutput
from embreg.models.transform_sites import KeyedTransforms
from embreg.models.user_item import user_item_tables
from embreg.nn.layer_stack import SequentialSlice, SequentialStack, linear_block_bounds
from embreg.registry import register


def _dim_of(module: nn.Module, name: str) -> int:
    dim = getattr(module, "embedding_dim", None)
    if dim is None:
        raise ValueError(f"{name} has no embedding_dim attribute; pass dim= explicitly")
    return int(dim)


class NeuMFLayer(nn.Module):
    """Layer ``r`` of NCF's layer stack: MLP block ``r`` with the GMF product carried beside it.

    Layer 1 maps ``h_0 = [u ; v]`` (shared tables) or ``[u ; v ; u' ; v']`` (separate MLP tables) to
    ``h_1 = [u * v ; mlp_1(mlp input)]``; layer ``r > 1`` maps ``[g ; m]`` to ``[g ; mlp_r(m)]``, ``g = u * v``.
    The MLP block is a :class:`~embreg.nn.layer_stack.SequentialSlice` of the model's ``mlp`` (no new parameters).

    Args:
        block: MLP block ``r`` (``Linear -> LeakyReLU (-> Dropout)``).
        gmf_dim: ``D``, the width of ``u``, ``v`` and the GMF product.
        first: this is layer 1 (it forms ``u * v`` from ``h_0``).
        mlp_offset: where the MLP's input starts in ``h_0`` (layer 1: 0 for shared tables, ``2D`` for separate
            ones); in later layers the MLP part starts at ``D``.

    Shapes:
        ``(B, W_{r-1}) -> (B, D + w_r)``, ``w_r`` the width of MLP block ``r``.
    """

    def __init__(self, block: nn.Module, gmf_dim: int, *, first: bool, mlp_offset: int = 0) -> None:
        super().__init__()
        self.block = block
        self.gmf_dim = gmf_dim
        self.first = first
        self.mlp_offset = mlp_offset

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        d = self.gmf_dim
        if self.first:
            gmf = hidden[:, :d] * hidden[:, d : 2 * d]
            mlp_part = hidden[:, self.mlp_offset :].contiguous() if self.mlp_offset else hidden
        else:
            # contiguous, so the block's matmul sees the same memory layout as a plain MLP would (same bits)
            gmf, mlp_part = hidden[:, :d], hidden[:, d:].contiguous()
        return torch.cat([gmf, self.block(mlp_part)], dim=-1)

    def extra_repr(self) -> str:
        return f"gmf_dim={self.gmf_dim}, first={self.first}, mlp_offset={self.mlp_offset}"


class NCF(KeyedTransforms, nn.Module):
    """NeuMF-style rating model: ``r_hat = mu + w^T [u * v ; MLP([u ; v])] + b``, squared loss.

    By default the GMF branch and the MLP branch read the *same* user and item vectors (one table each, so
    mixed-dimension sizing acts on every embedding parameter); pass ``mlp_user_embedding`` /
    ``mlp_item_embedding`` for NeuMF's separate MLP tables.

    Args:
        user_embedding: user ids (B,) -> (B, D).
        item_embedding: item ids (B,) -> (B, D).
        mlp_dims: hidden widths of the MLP branch (paper: 128-128-32).
        global_mean: ``mu``, the mean training rating.
        negative_slope: LeakyReLU slope.
        dropout: dropout inside the MLP.
        connections: layer connections of the MLP branch (:func:`embreg.models.mlp.mlp`), default ``"none"``.
        mlp_user_embedding, mlp_item_embedding: optional separate tables for the MLP branch (B,) -> (B, D').
        user_transform, item_transform: optional ids -> ids modules applied in training (SSE).
        dim: D when the embeddings have no ``embedding_dim`` attribute.

    Layer stack (:meth:`layer_stack`, for LNSR, R3F, SMART and LayerNoise; lnsr-noise-stability-bert.txt, Sec. 3.1
    and 5.4): ``h_0`` is the looked-up vectors the network consumes, ``[u ; v]`` ``(B, 2D)`` (with separate MLP
    tables ``[u ; v ; u' ; v']``), so "noise on the embeddings" perturbs the GMF and the MLP inputs alike; layer
    ``r`` is MLP block ``r`` with the GMF product carried along, ``h_r = [u * v ; mlp_r]`` ``(B, D + w_r)``
    (:class:`NeuMFLayer`); the head is ``mu + w^T h_L + b``. ``forward`` returns the ``L + 1`` states in
    ``hidden`` (keys ``hidden_states.<i>``) beside ``user_vectors`` and ``item_vectors``.

    Example:
        >>> model = NCF(nn.Embedding(10, 8), nn.Embedding(20, 8), global_mean=3.5)
        >>> batch = {"user": torch.tensor([0, 9]), "item": torch.tensor([3, 19]), "rating": torch.tensor([4., 2.])}
        >>> out = model(batch)
        >>> out.predictions.shape, model.loss(batch, out).ndim
        (torch.Size([2]), 0)
    """

    def __init__(
        self,
        user_embedding: nn.Module,
        item_embedding: nn.Module,
        *,
        mlp_dims: Sequence[int] = (128, 128, 32),
        global_mean: float = 0.0,
        negative_slope: float = 0.01,
        dropout: float = 0.0,
        mlp_user_embedding: nn.Module | None = None,
        mlp_item_embedding: nn.Module | None = None,
        user_transform: nn.Module | None = None,
        item_transform: nn.Module | None = None,
        dim: int | None = None,
        connections: str = "none",
    ) -> None:
        super().__init__()
        if not mlp_dims:
            raise ValueError("mlp_dims is empty; give at least one hidden width, e.g. (128, 128, 32)")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout={dropout} is outside [0, 1)")
        gmf_dim = dim if dim is not None else _dim_of(user_embedding, "user_embedding")
        self.user_embedding = user_embedding
        self.item_embedding = item_embedding
        self.mlp_user_embedding = mlp_user_embedding
        self.mlp_item_embedding = mlp_item_embedding
        mlp_in = 2 * gmf_dim
        if mlp_user_embedding is not None or mlp_item_embedding is not None:
            if mlp_user_embedding is None or mlp_item_embedding is None:
                raise ValueError("give both mlp_user_embedding and mlp_item_embedding, or neither")
            mlp_in = _dim_of(mlp_user_embedding, "mlp_user_embedding") + _dim_of(
                mlp_item_embedding, "mlp_item_embedding"
            )
        self.mlp = mlp(mlp_in, mlp_dims, negative_slope=negative_slope, dropout=dropout, connections=connections)
        separate = mlp_user_embedding is not None
        self.stack_layers = nn.ModuleList(
            NeuMFLayer(
                SequentialSlice(self.mlp, start, stop),
                gmf_dim,
                first=r == 0,
                mlp_offset=2 * gmf_dim if separate and r == 0 else 0,
            )
            for r, (start, stop) in enumerate(linear_block_bounds(self.mlp))
        )
        self.output = nn.Linear(gmf_dim + mlp_dims[-1], 1)
        nn.init.xavier_uniform_(self.output.weight)
        nn.init.zeros_(self.output.bias)
        self.user_transform = user_transform if user_transform is not None else nn.Identity()
        self.item_transform = item_transform if item_transform is not None else nn.Identity()
        self.register_buffer("global_mean", torch.tensor(float(global_mean)))

    def transform_sites(self) -> list[tuple[str, nn.Module]]:
        """``user`` and ``item`` ids with their transforms (:mod:`embreg.models.transform_sites`)."""
        return [("user", self.user_transform), ("item", self.item_transform)]

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        """Predicted ratings (B,) for ``batch["user"]``, ``batch["item"]`` (both (B,))."""
        users = self.user_transform(batch["user"])
        items = self.item_transform(batch["item"])
        u = self.user_embedding(users)
        v = self.item_embedding(items)
        parts = [u, v]
        if self.mlp_user_embedding is not None:
            if self.mlp_item_embedding is None:  # __init__ takes both or neither
                raise ValueError("mlp_user_embedding is set but mlp_item_embedding is None; set both or neither")
            parts += [self.mlp_user_embedding(users), self.mlp_item_embedding(items)]
        states = [torch.cat(parts, dim=-1)]  # h_0
        for layer in self.stack_layers:
            states.append(layer(states[-1]))
        predictions = self.head(states[-1])
        return ModelOutput(
            predictions=predictions, hidden={"user_vectors": u, "item_vectors": v, **hidden_states_dict(states)}
        )

    def head(self, last_hidden: torch.Tensor) -> torch.Tensor:
        """``mu + w^T h_L + b``: ratings ``(B,)`` from the last state ``h_L = [u * v ; MLP]`` ``(B, D + w_L)``."""
        return self.global_mean + self.output(last_hidden).squeeze(-1)

    def layer_stack(self) -> SequentialStack:
        """The stack ``h_0 = [u ; v] -> [u * v ; mlp_1] -> ... -> [u * v ; mlp_L]``, head :meth:`head`.

        Example:
            >>> model = NCF(nn.Embedding(4, 2), nn.Embedding(5, 2), mlp_dims=(3, 3)).eval()
            >>> batch = {"user": torch.tensor([0, 3]), "item": torch.tensor([1, 4])}
            >>> out, stack = model(batch), model.layer_stack()
            >>> h = stack.clean_states(out)
            >>> stack.num_layers, [tuple(t.shape) for t in h]
            (2, [(2, 4), (2, 5), (2, 5)])
            >>> torch.equal(stack.predict(stack.run(h[0], batch)[-1], batch), out.predictions)
            True
        """
        return SequentialStack(list(self.stack_layers), head=self.head)

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Mean squared error (the paper's CF objective: no norm regularisation, Appendix B)."""
        return (output.predictions - batch["rating"]).pow(2).mean()

    @torch.no_grad()
    def predict(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Predicted ratings (B,) in the current mode."""
        return self(batch).predictions


@dataclass
class NCFConfig:
    """``model: {name: ncf, dim: 64, mlp: [128, 128, 32]}``.

    Attributes:
        dim: embedding dimension of the GMF and MLP branches (the base dimension of mixed-dimension tables).
        dropout: dropout in the MLP.
        init_std, init: how the embedding tables start (see :class:`embreg.models.user_item.UserItemConfig`); the
            linear layers start uniform Xavier with zero biases.
        mlp: the MLP's hidden widths (mixed-dimension-embeddings.txt, Appendix H: 128-128-32).
        connections: the MLP's layer connections, ``none`` (the paper's plain MLP), ``residual``, ``highway`` or
            ``dense`` (nlp-best-practices.txt, "Layer connections"; :func:`embreg.models.mlp.mlp`).
    """

    dim: int = 64
    dropout: float = 0.0
    init_std: float = 0.1
    init: Literal["normal", "xavier_uniform"] = "normal"
    mlp: list[int] = field(default_factory=lambda: [128, 128, 32])
    connections: Literal["none", "residual", "highway", "dense"] = "none"

    def __post_init__(self) -> None:
        if self.dim < 1 or not self.mlp or any(width < 1 for width in self.mlp):
            raise ConfigError(f"model.dim={self.dim} and model.mlp={self.mlp} must be >= 1 (mlp non-empty)")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"model.dropout={self.dropout} is outside [0, 1)")


@register(
    "model",
    "ncf",
    config=NCFConfig,
    tasks=("rating",),
    kinds=("user", "item"),
    embeddings=("uniform", "md"),
    provides=("layer_stack", "linear_layers"),
    summary="neural collaborative filtering (GMF + MLP), squared loss",
    reference="mixed-dimension-embeddings.txt, Appendix H (NCF)",
)
def build_ncf(config: NCFConfig, context: Any) -> NCF:
    """:class:`NCF` over the recipe's user/item tables, with its user/item index transforms."""
    users, items = user_item_tables(config, context)
    return NCF(
        users,
        items,
        mlp_dims=tuple(config.mlp),
        global_mean=context.adapter.global_mean(context.prepared),
        dropout=config.dropout,
        user_transform=context.transforms.get("user"),
        item_transform=context.transforms.get("item"),
        connections=config.connections,
    )

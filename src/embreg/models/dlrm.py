"""A DLRM-style click-through-rate model with one embedding module per categorical field.

References: mixed-dimension-embeddings.txt, Sec. II (the CTR task: categorical features ``x_1..x_kappa`` and a
dense vector ``x'``), Sec. V and Appendix I (DLRM [11] with mixed-dimension embeddings, one block per feature).
Architecture: a bottom MLP maps the dense features to the base dimension D; every field is embedded at D; the
pairwise dot products of all these vectors, together with the bottom output, feed a top MLP that outputs a
click logit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import torch
import torch.nn.functional as F
from torch import nn

from embreg.embeddings.tables import TableRequest
from embreg.errors import ConfigError
from embreg.models.hidden_states import hidden_states_dict
from embreg.models.mlp import mlp
from embreg.models.output import ModelOutput
from embreg.models.transform_sites import is_passed_through, present_transforms
from embreg.nn.layer_stack import SequentialSlice, SequentialStack, linear_block_bounds
from embreg.registry import register

FIELD_KIND = "field"
"""The id kind of the categorical fields (``field:<name>`` for one): :data:`embreg.id_kinds.FIELD_KIND`,
spelt here too since models do not import the recipes floor."""


class InteractionLayer(nn.Module):
    """Layer 1 of DLRM's layer stack: pairwise dot interactions, then the first top-MLP block.

    From ``h_0`` the stacked vectors ``(B, V, D)`` it forms the ``V(V-1)/2`` dot products of distinct pairs (the
    strictly lower triangle of ``h_0 h_0^T``), puts the dense vector ``h_0[:, 0]`` in front of them when the model
    has dense features, and runs the first top-MLP block (none when the top MLP is just its output layer).

    Args:
        num_vectors: ``V``.
        dense: ``h_0[:, 0]`` is the bottom MLP's output and joins the interactions.
        block: the first top-MLP block, or ``None``.

    Shapes:
        ``(B, V, D) -> (B, w_1)`` (``w_1`` the first top width; without a block ``(B, [D +] V(V-1)/2)``).
    """

    # buffers registered in __init__, declared here for type checkers
    pair_rows: torch.Tensor
    pair_cols: torch.Tensor

    def __init__(self, num_vectors: int, *, dense: bool, block: nn.Module | None) -> None:
        super().__init__()
        rows, cols = torch.tril_indices(num_vectors, num_vectors, offset=-1)
        self.register_buffer("pair_rows", rows, persistent=False)
        self.register_buffer("pair_cols", cols, persistent=False)
        self.dense = dense
        self.block = block

    def forward(self, stacked: torch.Tensor, record: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """The layer's output; ``record`` (if given) receives the ``"interactions"`` ``(B, V(V-1)/2)``."""
        gram = stacked @ stacked.transpose(1, 2)  # (B, V, V)
        pairs = gram[:, self.pair_rows, self.pair_cols]  # (B, V(V-1)/2)
        if record is not None:
            record["interactions"] = pairs
        top_in = torch.cat([stacked[:, 0], pairs], dim=1) if self.dense else pairs
        return top_in if self.block is None else self.block(top_in)


class DLRM(nn.Module):
    """Dense bottom MLP + per-field embeddings + pairwise dot interactions + top MLP -> logit; BCE loss.

    Batches hold ``"categorical"`` (B, F) ids of the single-valued fields (column ``j`` goes to
    ``embeddings[j]``), optionally ``"bags"`` (B, G, L) padded ids of multi-valued fields (``bags[:, g]`` goes
    to ``bag_embeddings[g]``, e.g. a :class:`~embreg.embeddings.MixedDimensionEmbeddingBag` with a padding id),
    ``"dense"`` (B, S) floats and ``"label"`` (B,) in {0, 1}. Any module mapping ids to (B, D) works as an
    embedding (``nn.Embedding``, mixed-dimension, SSE-wrapped).

    Args:
        embeddings: one module per single-valued field, ids (B,) -> (B, D).
        num_dense: S, dense features (0: no bottom MLP).
        dim: D, the common embedding dimension (default: the first module's ``embedding_dim``).
        bag_embeddings: one module per multi-valued field, ids (B, L) -> (B, D).
        bottom_mlp: hidden widths of the bottom MLP before its last layer (which outputs D).
        top_mlp: hidden widths of the top MLP before its output layer (which outputs 1).
        connections: layer connections of the hidden layers of both MLPs (:func:`embreg.models.mlp.mlp`).
        negative_slope: LeakyReLU slope of both MLPs.
        field_transforms: one ids -> ids module (or ``None``) per single-valued field, applied in training to that
            field's column (e.g. :class:`embreg.sse.SSE` over the field's own ids; sse-stochastic-shared-embeddings.txt,
            eq. 5, one field at a time); empty: none.
        bag_transforms: the same per multi-valued field, applied to its non-padding ids.
        bag_padding: the padding id of each multi-valued field (needed with ``bag_transforms``).

    Layer stack (:meth:`layer_stack`, for LNSR, R3F, SMART and LayerNoise; lnsr-noise-stability-bert.txt, Sec. 3.1
    and 5.4): ``h_0`` is the stacked vectors ``(B, V, D)`` that enter the interaction -- the bottom MLP's output
    first (when there are dense features), then one vector per field and per bag. The dense vector is part of
    ``h_0`` because the interaction treats it like any field vector (and also passes it on directly); R3F's and
    SMART's "noise on the embeddings" therefore perturbs it too. Layer 1 is the interaction followed by the first
    top-MLP block (:class:`InteractionLayer`), layer ``r > 1`` top-MLP block ``r``, and the head is the top MLP's
    output layer -> logits ``(B,)``. ``forward`` returns the ``L + 1`` states in ``hidden`` (keys
    ``hidden_states.<i>``) beside ``"interactions"``.

    Shapes:
        predictions: (B,) click logits (apply ``sigmoid`` for probabilities).

    Example:
        >>> model = DLRM([nn.Embedding(5, 4), nn.Embedding(7, 4)], num_dense=3)
        >>> batch = {"categorical": torch.tensor([[0, 6], [4, 1]]), "dense": torch.randn(2, 3),
        ...          "label": torch.tensor([1.0, 0.0])}
        >>> out = model(batch)
        >>> out.predictions.shape, model.loss(batch, out).ndim
        (torch.Size([2]), 0)
    """

    def __init__(
        self,
        embeddings: Sequence[nn.Module],
        num_dense: int,
        *,
        dim: int | None = None,
        bag_embeddings: Sequence[nn.Module] = (),
        bottom_mlp: Sequence[int] = (64,),
        top_mlp: Sequence[int] = (64, 32),
        negative_slope: float = 0.01,
        field_transforms: Sequence[nn.Module | None] = (),
        bag_transforms: Sequence[nn.Module | None] = (),
        bag_padding: Sequence[int | None] = (),
        connections: str = "none",
    ) -> None:
        super().__init__()
        if not embeddings and not bag_embeddings:
            raise ValueError("DLRM needs at least one embedding module")
        if num_dense < 0:
            raise ValueError(f"num_dense={num_dense} must be >= 0")
        first = (list(embeddings) + list(bag_embeddings))[0]
        if dim is None:
            embedding_dim = getattr(first, "embedding_dim", None)
            if embedding_dim is None:
                raise ValueError("the first embedding has no embedding_dim attribute; pass dim= explicitly")
            dim = int(embedding_dim)
        self.dim = dim
        self.num_dense = num_dense
        self.embeddings = nn.ModuleList(embeddings)
        self.bag_embeddings = nn.ModuleList(bag_embeddings)
        self.field_transforms = _transform_list(field_transforms, len(self.embeddings), "field_transforms")
        self.bag_transforms = _transform_list(bag_transforms, len(self.bag_embeddings), "bag_transforms")
        if any(not isinstance(t, nn.Identity) for t in self.bag_transforms) and len(bag_padding) != len(
            self.bag_embeddings
        ):
            raise ValueError(f"bag_padding needs one padding id (or None) per bag field, got {list(bag_padding)}")
        self.bag_padding = list(bag_padding)
        if connections != "none" and not num_dense and not top_mlp:
            raise ValueError(
                f"connections={connections!r} has no layer to connect: no dense features (no bottom MLP) and no "
                "hidden layer in the top MLP"
            )
        self.bottom = (
            mlp(num_dense, [*bottom_mlp, dim], negative_slope=negative_slope, connections=connections)
            if num_dense
            else None
        )
        num_vectors = len(self.embeddings) + len(self.bag_embeddings) + (1 if num_dense else 0)
        top_in = num_vectors * (num_vectors - 1) // 2 + (dim if num_dense else 0)
        top_connections = connections if top_mlp else "none"  # the output layer alone has nothing to connect
        self.top = mlp(
            top_in, [*top_mlp, 1], negative_slope=negative_slope, last_activation=False, connections=top_connections
        )
        blocks = [SequentialSlice(self.top, start, stop) for start, stop in linear_block_bounds(self.top)[:-1]]
        self.stack_layers = nn.ModuleList(
            [InteractionLayer(num_vectors, dense=bool(num_dense), block=blocks[0] if blocks else None), *blocks[1:]]
        )

    @property
    def pair_rows(self) -> torch.Tensor:
        """Row index of each interaction pair (the strictly lower triangle), ``(V(V-1)/2,)``."""
        return cast(InteractionLayer, self.stack_layers[0]).pair_rows  # layer 1 is the interaction

    @property
    def pair_cols(self) -> torch.Tensor:
        """Column index of each interaction pair, ``(V(V-1)/2,)``."""
        return cast(InteractionLayer, self.stack_layers[0]).pair_cols  # layer 1 is the interaction

    # --------------------------------------------------------------------------------------- index transforms
    def index_transforms(self) -> list[nn.Module]:
        """The fields' index transforms that are set (:mod:`embreg.models.transform_sites`)."""
        return present_transforms([*self.field_transforms, *self.bag_transforms])

    def draw_index_transforms(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` with ``categorical`` and ``bags`` as this training step's forward pass draws them."""
        drawn = dict(batch)
        if len(self.embeddings) and "categorical" in batch:
            drawn["categorical"] = self._transformed_fields(batch["categorical"])
        if len(self.bag_embeddings) and "bags" in batch:
            drawn["bags"] = self._transformed_bags(batch["bags"])
        return drawn

    def _transformed_fields(self, categorical: torch.Tensor) -> torch.Tensor:
        """``categorical`` (B, F) with each field's transform applied to its column (a new tensor if any acts)."""
        if all(isinstance(t, nn.Identity) for t in self.field_transforms):
            return categorical
        return torch.stack([t(categorical[:, j]) for j, t in enumerate(self.field_transforms)], dim=1)

    def _transformed_bags(self, bags: torch.Tensor) -> torch.Tensor:
        """``bags`` (B, G, L) with each bag field's transform applied to its non-padding ids."""
        if all(isinstance(t, nn.Identity) for t in self.bag_transforms):
            return bags
        columns = []
        for g, transform in enumerate(self.bag_transforms):
            ids = bags[:, g]
            if isinstance(transform, nn.Identity) or is_passed_through(transform):
                columns.append(ids)
                continue
            pad = self.bag_padding[g]
            keep = ids != pad if pad is not None else torch.ones_like(ids, dtype=torch.bool)
            drawn = ids.clone()
            drawn[keep] = transform(ids[keep])
            columns.append(drawn)
        return torch.stack(columns, dim=1)

    # ---------------------------------------------------------------------------------------------- forward
    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        """Click logits (B,) for a batch (see the class docstring for its keys); in training, each field's index
        transform (e.g. SSE) first swaps that field's ids."""
        vectors = []
        if self.bottom is not None:
            vectors.append(self.bottom(batch["dense"]))
        if len(self.embeddings):
            categorical = self._transformed_fields(batch["categorical"])
            vectors.extend(emb(categorical[:, j]) for j, emb in enumerate(self.embeddings))
        if len(self.bag_embeddings):
            bags = self._transformed_bags(batch["bags"])
            vectors.extend(emb(bags[:, g]) for g, emb in enumerate(self.bag_embeddings))
        hidden: dict[str, torch.Tensor] = {}
        states = [torch.stack(vectors, dim=1)]  # h_0: (B, V, D)
        states.append(self.stack_layers[0](states[0], hidden))
        for layer in self.stack_layers[1:]:
            states.append(layer(states[-1]))
        logits = self.head(states[-1])
        return ModelOutput(predictions=logits, hidden={**hidden, **hidden_states_dict(states)})

    def head(self, last_hidden: torch.Tensor) -> torch.Tensor:
        """The top MLP's output layer: logits ``(B,)`` from ``h_L`` ``(B, w_L)``."""
        return self.top[len(self.top) - 1](last_hidden).squeeze(-1)

    def layer_stack(self) -> SequentialStack:
        """The stack ``h_0 = stacked vectors -> interaction + top block 1 -> top block 2 -> ...``, head :meth:`head`.

        Example:
            >>> model = DLRM([nn.Embedding(5, 4), nn.Embedding(7, 4)], num_dense=3, top_mlp=(8, 6)).eval()
            >>> batch = {"categorical": torch.tensor([[0, 6], [4, 1]]), "dense": torch.randn(2, 3)}
            >>> out, stack = model(batch), model.layer_stack()
            >>> h = stack.clean_states(out)
            >>> stack.num_layers, [tuple(t.shape) for t in h]
            (2, [(2, 3, 4), (2, 8), (2, 6)])
            >>> torch.equal(stack.predict(stack.run(h[0], batch)[-1], batch), out.predictions)
            True
        """
        return SequentialStack(list(self.stack_layers), head=self.head)

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Binary cross-entropy of the logits against ``batch["label"]`` (Sec. II: cross entropy)."""
        return F.binary_cross_entropy_with_logits(output.predictions, batch["label"].to(output.predictions.dtype))


def _transform_list(transforms: Sequence[nn.Module | None], count: int, name: str) -> nn.ModuleList:
    """``transforms`` as a ModuleList of ``count`` modules (``None`` -> ``nn.Identity``); empty: all identity."""
    if len(transforms) not in (0, count):
        raise ValueError(f"{name} has {len(transforms)} entries; expected one per field ({count}) or none")
    modules = list(transforms) or [None] * count
    return nn.ModuleList(nn.Identity() if t is None else t for t in modules)


@dataclass
class DLRMConfig:
    """``model: {name: dlrm, dim: 16, bottom_mlp: [64], top_mlp: [64, 32]}``.

    Attributes:
        dim: embedding dimension (the base dimension of mixed-dimension tables).
        init_std, init: how the embedding tables start; the linear layers start uniform Xavier with zero biases.
        bottom_mlp: hidden widths of the bottom MLP on the dense features (its last layer outputs ``dim``).
        top_mlp: hidden widths of the top MLP (its last layer outputs the logit).
        connections: layer connections of both MLPs' hidden layers, ``none`` (the plain MLPs), ``residual``,
            ``highway`` or ``dense`` (nlp-best-practices.txt, "Layer connections"; :func:`embreg.models.mlp.mlp`);
            the top MLP's output layer stays plain.
    """

    dim: int = 16
    init_std: float = 0.1
    init: Literal["normal", "xavier_uniform"] = "normal"
    bottom_mlp: list[int] = field(default_factory=lambda: [64])
    top_mlp: list[int] = field(default_factory=lambda: [64, 32])
    connections: Literal["none", "residual", "highway", "dense"] = "none"

    def __post_init__(self) -> None:
        if self.dim < 1 or any(width < 1 for width in self.bottom_mlp + self.top_mlp):
            raise ConfigError(
                f"model.dim={self.dim}, bottom_mlp={self.bottom_mlp} and top_mlp={self.top_mlp} must hold sizes >= 1"
            )


@register(
    "model",
    "dlrm",
    config=DLRMConfig,
    tasks=("ctr",),
    kinds=(FIELD_KIND,),
    embeddings=("uniform", "md"),
    provides=("layer_stack", "linear_layers"),
    summary="DLRM: bottom MLP, per-field embeddings, pairwise dot interactions, top MLP -> click logit",
    reference="mixed-dimension-embeddings.txt, Sec. IV (DLRM)",
)
def build_dlrm(config: DLRMConfig, context: Any) -> DLRM:
    """:class:`DLRM` over one table per field of the task's click table (uniform or one MD block per field), with
    the recipe's per-field index transforms (``index_transforms.field`` or ``field:<name>``, built one per field by
    :func:`embreg.id_kinds.build_index_transforms`)."""
    prepared = context.prepared
    table = prepared.table
    num_single = len(table.cardinalities)
    frequencies = list(prepared.part("train").field_frequencies())
    bag_fields = {num_single + g: table.bag_padding(g) for g in range(len(table.bag_names))}
    request = TableRequest(
        frequencies, dim=config.dim, init=config.init, init_std=config.init_std, layout="fields", bag_fields=bag_fields
    )
    if config.connections != "none" and not config.top_mlp and not table.dense_names:
        raise ConfigError(
            f"model.connections={config.connections!r}: model 'dlrm' has no layer to connect (no dense features for "
            "a bottom MLP and model.top_mlp is empty); use connections: none or give top_mlp widths"
        )
    tables, plan = context.tables(request)
    dim = config.dim if plan is None else plan.base_dim
    return DLRM(
        tables[:num_single],
        len(table.dense_names),
        dim=dim,
        bag_embeddings=tables[num_single:],
        bottom_mlp=tuple(config.bottom_mlp),
        top_mlp=tuple(config.top_mlp),
        field_transforms=[context.transforms.get(f"{FIELD_KIND}:{name}") for name in table.field_names],
        bag_transforms=[context.transforms.get(f"{FIELD_KIND}:{name}") for name in table.bag_names],
        bag_padding=[table.bag_padding(g) for g in range(len(table.bag_names))],
        connections=config.connections,
    )

"""A DLRM-style click-through-rate model with one embedding module per categorical field.

References: mixed-dimension-embeddings.txt, Sec. II (the CTR task: categorical features ``x_1..x_kappa`` and a
dense vector ``x'``), Sec. V and Appendix I (DLRM [11] with mixed-dimension embeddings, one block per feature).
Architecture: a bottom MLP maps the dense features to the base dimension D; every field is embedded at D; the
pairwise dot products of all these vectors, together with the bottom output, feed a top MLP that outputs a
click logit.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from embreg.models.mlp import mlp
from embreg.models.output import ModelOutput


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
        negative_slope: LeakyReLU slope of both MLPs.

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
    ) -> None:
        super().__init__()
        if not embeddings and not bag_embeddings:
            raise ValueError("DLRM needs at least one embedding module")
        if num_dense < 0:
            raise ValueError(f"num_dense={num_dense} must be >= 0")
        first = (list(embeddings) + list(bag_embeddings))[0]
        if dim is None:
            if not hasattr(first, "embedding_dim"):
                raise ValueError("the first embedding has no embedding_dim attribute; pass dim= explicitly")
            dim = int(first.embedding_dim)
        self.dim = dim
        self.num_dense = num_dense
        self.embeddings = nn.ModuleList(embeddings)
        self.bag_embeddings = nn.ModuleList(bag_embeddings)
        self.bottom = mlp(num_dense, [*bottom_mlp, dim], negative_slope=negative_slope) if num_dense else None
        num_vectors = len(self.embeddings) + len(self.bag_embeddings) + (1 if num_dense else 0)
        rows, cols = torch.tril_indices(num_vectors, num_vectors, offset=-1)
        self.register_buffer("pair_rows", rows, persistent=False)
        self.register_buffer("pair_cols", cols, persistent=False)
        top_in = rows.numel() + (dim if num_dense else 0)
        self.top = mlp(top_in, [*top_mlp, 1], negative_slope=negative_slope, last_activation=False)

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        """Click logits (B,) for a batch (see the class docstring for its keys)."""
        vectors = []
        if self.bottom is not None:
            vectors.append(self.bottom(batch["dense"]))
        if len(self.embeddings):
            categorical = batch["categorical"]
            vectors.extend(emb(categorical[:, j]) for j, emb in enumerate(self.embeddings))
        if len(self.bag_embeddings):
            bags = batch["bags"]
            vectors.extend(emb(bags[:, g]) for g, emb in enumerate(self.bag_embeddings))
        stacked = torch.stack(vectors, dim=1)  # (B, V, D)
        gram = stacked @ stacked.transpose(1, 2)  # (B, V, V)
        pairs = gram[:, self.pair_rows, self.pair_cols]  # (B, V(V-1)/2)
        top_in = torch.cat([vectors[0], pairs], dim=1) if self.bottom is not None else pairs
        logits = self.top(top_in).squeeze(-1)
        return ModelOutput(predictions=logits, hidden={"interactions": pairs})

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Binary cross-entropy of the logits against ``batch["label"]`` (Sec. II: cross entropy)."""
        return F.binary_cross_entropy_with_logits(output.predictions, batch["label"].to(output.predictions.dtype))

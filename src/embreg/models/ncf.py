"""Neural collaborative filtering (GMF + MLP) for explicit ratings, with any user/item embedding modules.

References: mixed-dimension-embeddings.txt, Sec. V ("Case Study: Collaborative Filtering") and Appendix H
("for the NCF model, we use a 3-layer MLP with hidden layer dimensions 128-128-32 ... default LeakyReLU
activations"); the GMF + MLP fusion is the NeuMF design of the NCF paper cited there ([26]).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from embreg.models.mlp import mlp
from embreg.models.output import ModelOutput


def _dim_of(module: nn.Module, name: str) -> int:
    dim = getattr(module, "embedding_dim", None)
    if dim is None:
        raise ValueError(f"{name} has no embedding_dim attribute; pass dim= explicitly")
    return int(dim)


class NCF(nn.Module):
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
        mlp_user_embedding, mlp_item_embedding: optional separate tables for the MLP branch (B,) -> (B, D').
        user_transform, item_transform: optional ids -> ids modules applied in training (SSE).
        dim: D when the embeddings have no ``embedding_dim`` attribute.

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
            mlp_in = _dim_of(mlp_user_embedding, "mlp_user_embedding") + _dim_of(mlp_item_embedding,
                                                                                 "mlp_item_embedding")
        self.mlp = mlp(mlp_in, mlp_dims, negative_slope=negative_slope, dropout=dropout)
        self.output = nn.Linear(gmf_dim + mlp_dims[-1], 1)
        nn.init.xavier_uniform_(self.output.weight)
        nn.init.zeros_(self.output.bias)
        self.user_transform = user_transform if user_transform is not None else nn.Identity()
        self.item_transform = item_transform if item_transform is not None else nn.Identity()
        self.register_buffer("global_mean", torch.tensor(float(global_mean)))

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        """Predicted ratings (B,) for ``batch["user"]``, ``batch["item"]`` (both (B,))."""
        users = self.user_transform(batch["user"])
        items = self.item_transform(batch["item"])
        u = self.user_embedding(users)
        v = self.item_embedding(items)
        if self.mlp_user_embedding is not None:
            mlp_in = torch.cat([self.mlp_user_embedding(users), self.mlp_item_embedding(items)], dim=-1)
        else:
            mlp_in = torch.cat([u, v], dim=-1)
        fused = torch.cat([u * v, self.mlp(mlp_in)], dim=-1)
        predictions = self.global_mean + self.output(fused).squeeze(-1)
        return ModelOutput(predictions=predictions, hidden={"user_vectors": u, "item_vectors": v})

    def loss(self, batch: dict[str, torch.Tensor], output: ModelOutput) -> torch.Tensor:
        """Mean squared error (the paper's CF objective: no norm regularisation, Appendix B)."""
        return (output.predictions - batch["rating"]).pow(2).mean()

    @torch.no_grad()
    def predict(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Predicted ratings (B,) in the current mode."""
        return self(batch).predictions

"""Typed recipe configuration of the embedding tables: uniform or mixed-dimension (MD).

mixed-dimension-embeddings.txt: Alg. 1 (power-law sizing with temperature ``alpha`` from a base dimension or a
parameter budget), Alg. 3 (equipartition blocking of users and items), Sec. III (one block per field for CTR).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from embreg.errors import ConfigError


@dataclass
class EmbeddingConfig:
    """How the model's embedding tables are built.

    Attributes:
        kind: ``uniform`` (one ``nn.Embedding`` per table at ``model.dim``) or ``md`` (mixed dimensions).
        alpha: MD temperature in [0, 1] (0: uniform dimensions).
        budget: MD only: total embedding-row parameters ``sum n_i d_i`` over all tables (projections come on
            top and are reported exactly). ``null``: size from the base dimension ``model.dim`` instead (Alg. 1:
            the most popular block gets ``model.dim``).
        num_blocks: MD only, rating tasks: equipartition blocks per user/item table (CTR: one block per field).
        round_pow2: MD only: round dimensions to powers of two.
        min_dim: MD only: smallest block dimension.
        max_dim: MD only, with ``budget``: largest block dimension and then the base dimension (``null``: the
            base dimension is the largest block dimension).
    """

    kind: Literal["uniform", "md"] = "uniform"
    alpha: float = 0.3
    budget: float | None = None
    num_blocks: int = 8
    round_pow2: bool = False
    min_dim: int = 1
    max_dim: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"embedding.alpha={self.alpha} is outside the valid range [0, 1]")
        if self.budget is not None and self.budget <= 0:
            raise ConfigError(f"embedding.budget={self.budget} must be > 0 (or null to size from model.dim)")
        if self.num_blocks < 1:
            raise ConfigError(f"embedding.num_blocks={self.num_blocks} must be >= 1")
        if self.min_dim < 1:
            raise ConfigError(f"embedding.min_dim={self.min_dim} must be >= 1")
        if self.max_dim is not None and self.max_dim < self.min_dim:
            raise ConfigError(f"embedding.max_dim={self.max_dim} must be >= embedding.min_dim={self.min_dim}")

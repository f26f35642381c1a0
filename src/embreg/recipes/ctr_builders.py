"""Builders for CTR recipes: the table (adult, MovieLens-100k as CTR, or SYNTHETIC Criteo-like), its seeded
split, per-field embeddings (uniform or mixed-dimension, one block per field as in mixed-dimension-embeddings.txt,
Sec. III), the DLRM model, batches and the log-loss/accuracy/AUC evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from embreg.data import CTRData, load_adult, load_ml100k_ctr, random_split, synthetic_ctr
from embreg.embeddings import MixedDimensionPlan, init_embedding_, md_feature_embeddings
from embreg.errors import ConfigError
from embreg.models import DLRM
from embreg.recipes.embedding_builders import apply_table_init
from embreg.recipes.schema import RecipeConfig
from embreg.train.batches import TensorBatches
from embreg.train.ctr_evaluation import CTREvaluator

CTR_DATASETS = ("adult", "ml-100k-ctr", "synthetic-ctr")
SYNTHETIC_EXAMPLES = 200_000
SYNTHETIC_MAX_CARDINALITY = 100_000


def load_ctr_dataset(name: str) -> CTRData:
    """The CTR table called ``name`` (one of :data:`CTR_DATASETS`; ``synthetic-ctr`` is generated, seed 0)."""
    if name == "adult":
        return load_adult()
    if name == "ml-100k-ctr":
        return load_ml100k_ctr()
    if name == "synthetic-ctr":
        return synthetic_ctr(SYNTHETIC_EXAMPLES, max_cardinality=SYNTHETIC_MAX_CARDINALITY, seed=0)
    raise ConfigError(f"data.dataset={name!r} is not a CTR dataset; choose one of {CTR_DATASETS}")


@dataclass
class PreparedCTRData:
    """A CTR table, its seeded split and the training statistics that standardise the dense features.

    Attributes:
        table: the whole table.
        split: ``{"train"|"valid"|"test": index array}``.
        dense_mean, dense_std: (S,) training mean and standard deviation of each dense feature.
    """

    table: CTRData
    split: dict[str, np.ndarray]
    dense_mean: np.ndarray
    dense_std: np.ndarray

    def part(self, name: str) -> CTRData:
        return self.table.subset(self.split[name])

    def tensors(self, name: str) -> dict[str, torch.Tensor]:
        """A split as model inputs: ``categorical`` (N, F), ``dense`` (N, S) standardised, ``label`` (N,)
        and ``bags`` (N, G, L) when the table has multi-valued fields."""
        part = self.part(name)
        dense = (part.dense - self.dense_mean) / self.dense_std
        out = {"categorical": torch.from_numpy(part.categorical), "dense": torch.from_numpy(dense.astype(np.float32)),
               "label": torch.from_numpy(part.labels)}
        if part.bags is not None:
            out["bags"] = torch.from_numpy(part.bags)
        return out


def prepare_ctr_data(cfg: RecipeConfig) -> PreparedCTRData:
    """Loads ``cfg.data.dataset``, keeps ``max_rows`` and splits it at random with ``cfg.data.split_seed``."""
    d = cfg.data
    if d.path is not None:
        raise ConfigError("data.path is for rating files; CTR recipes use data.dataset "
                          f"({', '.join(CTR_DATASETS)})")
    table = load_ctr_dataset(d.dataset)
    if d.max_rows is not None and d.max_rows < len(table):
        table = table.subset(np.arange(d.max_rows))
    split = random_split(len(table), tuple(d.split), seed=d.split_seed)
    train_dense = table.dense[split["train"]].astype(np.float64)
    std = train_dense.std(0)
    return PreparedCTRData(table, split, train_dense.mean(0), np.where(std > 0, std, 1.0))


def build_ctr_embeddings(cfg: RecipeConfig, prepared: PreparedCTRData
                         ) -> tuple[list[nn.Module], list[nn.Module], MixedDimensionPlan | None]:
    """Per-field embeddings: single-valued fields, multi-valued (bag, mean-pooled) fields, and the MD plan."""
    e, m = cfg.embedding, cfg.model
    table = prepared.table
    num_single = len(table.cardinalities)
    if e.kind == "uniform":
        singles = [nn.Embedding(n, m.dim) for n in table.cardinalities]
        bags = [nn.EmbeddingBag(n, m.dim, mode="mean", padding_idx=table.bag_padding(g))
                for g, n in enumerate(table.bag_cardinalities)]
        for module in singles + bags:
            init_embedding_(module, m.init, std=m.init_std)
        return singles, bags, None
    frequencies = [torch.from_numpy(f) for f in prepared.part("train").field_frequencies()]
    bag_fields = {num_single + g: table.bag_padding(g) for g in range(len(table.bag_names))}
    try:
        layers, plan = md_feature_embeddings(
            frequencies, alpha=e.alpha, base_dim=m.dim if e.budget is None else e.max_dim, budget=e.budget,
            min_dim=e.min_dim, round_pow2=e.round_pow2, bag_fields=bag_fields, bag_mode="mean", init_std=m.init_std)
    except ValueError as exc:
        raise ConfigError(f"embedding: {exc}") from exc
    apply_table_init(m, *layers)
    return list(layers)[:num_single], list(layers)[num_single:], plan


def build_ctr_model(cfg: RecipeConfig, prepared: PreparedCTRData) -> DLRM:
    """DLRM over the recipe's per-field embeddings."""
    singles, bags, plan = build_ctr_embeddings(cfg, prepared)
    dim = cfg.model.dim if plan is None else plan.base_dim
    return DLRM(singles, len(prepared.table.dense_names), dim=dim, bag_embeddings=bags,
                bottom_mlp=tuple(cfg.model.bottom_mlp), top_mlp=tuple(cfg.model.top_mlp))


def build_ctr_batches(cfg: RecipeConfig, prepared: PreparedCTRData) -> TensorBatches:
    """Shuffled training batches of the CTR tensors."""
    return TensorBatches(prepared.tensors("train"), cfg.train.batch_size, seed=cfg.train.seed)


def build_ctr_evaluator(cfg: RecipeConfig, prepared: PreparedCTRData) -> CTREvaluator:
    """Log-loss, accuracy and AUC on the train, valid and test splits."""
    return CTREvaluator({name: prepared.tensors(name) for name in ("train", "valid", "test")})

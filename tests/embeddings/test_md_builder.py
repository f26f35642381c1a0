"""Builders: frequencies + alpha + (base dim or budget) + k -> layers with exact counts; joint sizing of tables."""

import pytest
import torch

from embreg.embeddings import (
    MixedDimensionEmbedding,
    MixedDimensionEmbeddingBag,
    md_embedding,
    md_embedding_tables,
    md_feature_embeddings,
)
from embreg.errors import EmbregError


def _zipf(n: int) -> torch.Tensor:
    return (1000.0 / torch.arange(1, n + 1)).floor()


def test_md_embedding_from_base_dim_gives_most_popular_block_the_base_dim():
    emb = md_embedding(_zipf(3000), num_blocks=4, alpha=0.3, base_dim=32)
    assert emb.block_dims[0] == 32 and list(emb.block_dims) == sorted(emb.block_dims, reverse=True)
    assert emb.num_parameters < emb.uniform_num_parameters
    top = int(_zipf(3000).argmax())
    position = int(emb.index_map[top])
    assert position == 0  # the most frequent id sits first in the blocked order


def test_joint_budget_is_met_and_counts_are_exact():
    (users, items), plan = md_embedding_tables([_zipf(900), _zipf(1600)], num_blocks=8, alpha=0.3, budget=40000)
    assert abs(plan.row_parameters - 40000) <= 0.5 * (900 + 1600)
    assert plan.num_parameters == users.num_parameters + items.num_parameters
    assert plan.num_parameters == sum(p.numel() for m in (users, items) for p in m.parameters())
    assert users.embedding_dim == items.embedding_dim == plan.base_dim == max(max(d) for d in plan.dims)


def test_alpha_zero_budget_is_a_uniform_table_without_projections():
    (users, items), plan = md_embedding_tables([_zipf(100), _zipf(300)], num_blocks=4, alpha=0.0, budget=400 * 16)
    assert plan.dims == ((16,) * 4, (16,) * 4) and plan.base_dim == 16
    assert all(block.projection is None for layer in (users, items) for block in layer.blocks)
    assert plan.num_parameters == 400 * 16 == plan.uniform_num_parameters


def test_feature_embeddings_one_layer_per_field_with_bags():
    freqs = [torch.full((3,), 100.0), _zipf(500), torch.tensor([40.0, 90, 20, 0])]
    layers, plan = md_feature_embeddings(freqs, alpha=0.4, base_dim=16, bag_fields={2: 3})
    assert [type(m) for m in layers] == [MixedDimensionEmbedding, MixedDimensionEmbedding, MixedDimensionEmbeddingBag]
    assert layers[0].block_dims == (16,)  # the 3-valued field is the most popular per value
    assert layers[1].block_dims[0] < 16
    assert layers[2](torch.tensor([[0, 1, 3]])).shape == (1, 16)
    assert plan.num_parameters == sum(p.numel() for p in layers.parameters())
    with pytest.raises(EmbregError, match=r"bag_fields \[5\] are outside the valid range \[0, 2\]"):
        md_feature_embeddings(freqs, alpha=0.4, base_dim=16, bag_fields={5: None})


def test_builder_errors_name_values():
    with pytest.raises(EmbregError, match=r"num_blocks=20 is outside the valid range \[1, 10\]"):
        md_embedding(_zipf(10), num_blocks=20, alpha=0.2, base_dim=8)
    with pytest.raises(EmbregError, match=r"budget=-5.*> 0"):
        md_embedding(_zipf(10), num_blocks=2, alpha=0.2, budget=-5)

"""init_embedding_: uniform Xavier (mixed-dimension-embeddings.txt, Appendix H-I) and normal starts of every
embedding table kind, and its errors."""

import math

import pytest
import torch
from torch import nn

from embreg.embeddings import MixedDimensionEmbedding, MixedDimensionEmbeddingBag, init_embedding_


def _assert_uniform(matrix: torch.Tensor, bound: float) -> None:
    assert matrix.abs().max() <= bound
    if matrix.numel() >= 1000:  # U(-b, b) has std b / sqrt(3); from 1,000 entries on, the sample std is within 10 %
        assert matrix.std().item() == pytest.approx(bound / math.sqrt(3.0), rel=0.1)
    else:  # a small matrix: its largest entry is near the bound, not near a normal start's scale
        assert matrix.abs().max() >= 0.7 * bound


def _xavier_bound(rows: int, columns: int) -> float:
    return math.sqrt(6.0 / (rows + columns))


def test_xavier_uniform_on_plain_tables_keeps_the_padding_row_zero():
    table = init_embedding_(nn.Embedding(300, 16, padding_idx=3), "xavier_uniform")
    _assert_uniform(table.weight[torch.arange(300) != 3], _xavier_bound(300, 16))
    assert torch.count_nonzero(table.weight[3]) == 0
    _assert_uniform(
        init_embedding_(nn.EmbeddingBag(300, 16, mode="mean"), "xavier_uniform").weight, _xavier_bound(300, 16)
    )


@pytest.mark.parametrize("make", [MixedDimensionEmbedding, MixedDimensionEmbeddingBag])
def test_xavier_uniform_draws_block_rows_as_rows_of_the_whole_table_and_projections_as_matrices(make):
    layer = init_embedding_(make([40, 200, 1200], [32, 8, 2], 32), "xavier_uniform")
    md = layer.embedding if isinstance(layer, MixedDimensionEmbeddingBag) else layer
    blocks = md.blocks
    for block in blocks:  # b_i = sqrt(6 / (N + d_i)), N = 1,440 rows in all
        _assert_uniform(block.weight, _xavier_bound(1440, block.weight.shape[1]))
    for block in blocks[1:]:  # the first block is at the base dimension: identity, no projection
        _assert_uniform(block.projection, _xavier_bound(*block.projection.shape))
    assert blocks[0].projection is None
    # the views wrote through to the layer's two flat parameters
    assert torch.equal(md.flat_rows[: 40 * 32].view(40, 32), blocks[0].weight)


def test_xavier_uniform_at_alpha_zero_starts_as_a_xavier_uniform_table():
    torch.manual_seed(0)
    md = init_embedding_(MixedDimensionEmbedding([50, 450, 1500], [16, 16, 16], 16), "xavier_uniform")
    torch.manual_seed(0)
    plain = init_embedding_(nn.Embedding(2000, 16), "xavier_uniform")
    assert torch.equal(md.flat_rows.view(2000, 16), plain.weight)


def test_normal_resets_rows_at_std_and_projections_at_one_over_root_d():
    layer = init_embedding_(MixedDimensionEmbedding([2000, 3000], [16, 4], 16), "normal", std=0.05)
    rows, projection = layer.blocks[1].weight, layer.blocks[1].projection
    assert rows.std().item() == pytest.approx(0.05, rel=0.1)
    assert layer.blocks[0].weight.std().item() == pytest.approx(0.05, rel=0.1)
    assert projection.std().item() == pytest.approx(0.5, rel=0.3)  # 64 entries, std 1 / sqrt(4)
    plain = init_embedding_(nn.Embedding(5000, 8), "normal", std=0.2)
    assert plain.weight.std().item() == pytest.approx(0.2, rel=0.1)


def test_bad_scheme_std_and_module_are_clear_errors():
    with pytest.raises(ValueError, match=r"unknown embedding init 'he'; choose one of \('normal', 'xavier_uniform'\)"):
        init_embedding_(nn.Embedding(3, 2), "he")
    with pytest.raises(ValueError, match="std=0.0 must be > 0"):
        init_embedding_(nn.Embedding(3, 2), "normal", std=0.0)
    with pytest.raises(TypeError, match="cannot initialise a Linear"):
        init_embedding_(nn.Linear(3, 2), "xavier_uniform")

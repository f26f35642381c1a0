"""The MD layer as a TorchRec EmbeddingBagCollection: same outputs as embreg's layer, gradients everywhere, FBGEMM-
friendly dimensions, clear errors. Skipped where TorchRec (the ``torchrec`` extra, docs/torchrec.md) is missing."""

from __future__ import annotations

import pytest
import torch

try:
    from embreg.integrations import torchrec_md
except ImportError as exc:  # TorchRec missing, or its FBGEMM does not load with this torch
    pytest.skip(f"needs the torchrec extra (docs/torchrec.md): {exc}", allow_module_level=True)

from torchrec import EmbeddingBagCollection, KeyedJaggedTensor  # noqa: E402

from embreg.embeddings import (  # noqa: E402
    MixedDimensionEmbedding,
    MixedDimensionEmbeddingBag,
    equipartition_blocks,
    md_embedding,
    power_law_sizes,
)
from embreg.errors import EmbregError  # noqa: E402

TorchRecMixedDimensionEmbedding = torchrec_md.TorchRecMixedDimensionEmbedding
COUNTS = 1000.0 / torch.arange(1, 401, dtype=torch.float64)  # Zipf-like query counts of 400 ids


def _embreg_layer(seed: int = 0) -> MixedDimensionEmbedding:
    """An embreg layer with a permuting index_map, an identity block and dims that are multiples of 4."""
    torch.manual_seed(seed)
    blocking = equipartition_blocks(COUNTS, 4)
    return MixedDimensionEmbedding.from_blocking(blocking, [16, 8, 8, 4], 16)


def _kjt(values: list[int], lengths: list[int], key: str = "ids") -> KeyedJaggedTensor:
    return KeyedJaggedTensor(keys=[key], values=torch.tensor(values), lengths=torch.tensor(lengths))


# --------------------------------------------------------------------------------------------------- equality


def test_the_tables_live_in_one_ebc_one_table_per_block_at_its_own_dim():
    layer = _embreg_layer()
    trec = TorchRecMixedDimensionEmbedding.from_mixed_dimension(layer, feature="item")
    assert isinstance(trec.ebc, EmbeddingBagCollection)
    configs = trec.ebc.embedding_bag_configs()
    assert [c.name for c in configs] == ["item_block0", "item_block1", "item_block2", "item_block3"]
    assert [c.embedding_dim for c in configs] == [16, 8, 8, 4]
    assert [c.num_embeddings for c in configs] == list(layer.block_rows)
    assert sorted(trec.projections) == ["1", "2", "3"]  # block 0 is at the base dim: identity, no projection
    assert trec.num_parameters == layer.num_parameters


def test_forward_equals_embreg_layer_for_every_id_and_any_shape():
    layer = _embreg_layer()
    trec = TorchRecMixedDimensionEmbedding.from_mixed_dimension(layer)
    every = torch.arange(layer.num_embeddings)
    torch.testing.assert_close(trec(every), layer(every))
    ids = torch.randint(0, layer.num_embeddings, (3, 5), generator=torch.Generator().manual_seed(1))
    assert trec(ids).shape == (3, 5, 16)
    torch.testing.assert_close(trec(ids), layer(ids))
    torch.testing.assert_close(trec(ids.to(torch.int32)), layer(ids))


def test_forward_equals_md_embedding_built_by_alg1_and_alg3_with_padding():
    torch.manual_seed(0)
    layer = md_embedding(COUNTS, num_blocks=3, alpha=0.5, base_dim=12)  # Alg. 1 dims, not all multiples of 4
    trec = TorchRecMixedDimensionEmbedding.from_mixed_dimension(layer, pad=True)
    assert trec.block_dims == layer.block_dims and all(t % 4 == 0 for t in trec.table_dims)
    ids = torch.arange(layer.num_embeddings)
    torch.testing.assert_close(trec(ids), layer(ids))


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_kjt_bags_equal_embreg_bag_layer(mode):
    layer = _embreg_layer()
    bag = MixedDimensionEmbeddingBag.from_embedding(layer, mode=mode)
    trec = TorchRecMixedDimensionEmbedding.from_mixed_dimension(bag, feature="tags")
    assert trec.pooling == mode
    values, lengths = [3, 399, 0, 250, 250, 17], [2, 0, 3, 1]
    other = KeyedJaggedTensor(
        keys=["other", "tags"], values=torch.tensor([1, 2, *values]), lengths=torch.tensor([1, 1, 0, 0, *lengths])
    )
    expected = bag(torch.tensor(values), torch.tensor([0, 2, 2, 5]))
    torch.testing.assert_close(trec(other), expected)
    assert torch.count_nonzero(trec(other)[1]) == 0  # an empty bag pools to zeros


def test_round_trip_back_to_embreg_layer_keeps_the_weights():
    layer = _embreg_layer()
    back = TorchRecMixedDimensionEmbedding.from_mixed_dimension(layer).to_mixed_dimension()
    assert back.layout == layer.layout
    assert torch.equal(back.index_map, layer.index_map.to(torch.int64).to(back.index_map.dtype))
    assert torch.equal(back.flat_rows, layer.flat_rows)
    assert torch.equal(back.flat_projections, layer.flat_projections)


def test_padding_accepts_any_dims_with_the_same_outputs():
    torch.manual_seed(0)
    layer = MixedDimensionEmbedding([5, 20, 40], [10, 6, 3], base_dim=10)
    with pytest.raises(EmbregError, match=r"block_dims\[0\]=10 is not a multiple of 4"):
        TorchRecMixedDimensionEmbedding.from_mixed_dimension(layer)
    trec = TorchRecMixedDimensionEmbedding.from_mixed_dimension(layer, pad=True)
    assert trec.table_dims == (12, 8, 4) and trec.block_dims == (10, 6, 3)
    ids = torch.arange(65)
    torch.testing.assert_close(trec(ids), layer(ids))
    ((trec(ids) ** 2).sum()).backward()
    for i, d in enumerate(trec.block_dims):  # the padding columns are never read: no gradient, stay 0
        grad = trec.table_weight(i).grad
        assert torch.count_nonzero(grad[:, d:]) == 0 and torch.count_nonzero(trec.table_weight(i)[:, d:]) == 0
    back = trec.to_mixed_dimension()
    torch.testing.assert_close(back(ids), layer(ids))


def test_dim_multiple_one_builds_unshardable_dims_without_padding():
    trec = TorchRecMixedDimensionEmbedding([5, 20], [10, 3], base_dim=10, dim_multiple=1)
    assert trec.table_dims == (10, 3)
    assert trec(torch.tensor([0, 24])).shape == (2, 10)


# -------------------------------------------------------------------------------------------------- gradients


def test_backward_reaches_every_block_and_projection_and_matches_embreg():
    layer = _embreg_layer()
    trec = TorchRecMixedDimensionEmbedding.from_mixed_dimension(layer)
    ids = torch.arange(layer.num_embeddings)  # every block is hit
    target = torch.randn(len(ids), 16, generator=torch.Generator().manual_seed(2))
    ((trec(ids) - target) ** 2).sum().backward()
    ((layer(ids) - target) ** 2).sum().backward()
    for i, block in enumerate(layer.blocks):
        grad = trec.table_weight(i).grad
        assert grad is not None and torch.count_nonzero(grad) > 0, f"block {i} got no gradient"
        torch.testing.assert_close(grad, block.weight_grad)
        if block.projection is not None:
            projection_grad = trec.projections[str(i)].grad
            assert projection_grad is not None and torch.count_nonzero(projection_grad) > 0
            torch.testing.assert_close(projection_grad, block.projection_grad)
    names = {name for name, p in trec.named_parameters() if p.grad is None}
    assert not names, f"parameters without a gradient: {names}"


def test_a_block_no_id_fell_in_gets_a_zero_gradient():
    trec = TorchRecMixedDimensionEmbedding([4, 8], [8, 4], base_dim=8)
    trec(torch.tensor([0, 1])).sum().backward()
    assert torch.count_nonzero(trec.table_weight(1).grad) == 0
    assert torch.count_nonzero(trec.projections["1"].grad) == 0


# ------------------------------------------------------------------------------------------------------ sizing


def test_power_law_dims_multiple_of_rounds_alg1_to_multiples_of_4():
    popularity = [0.5, 0.1, 0.01, 0.0001]
    dims = torchrec_md.power_law_dims_multiple_of(popularity, alpha=0.5, base_dim=64)
    sizes = power_law_sizes(popularity, alpha=0.5, base_dim=64)  # 64, 28.6, 9.05, 0.9
    assert dims == [64, 28, 8, 4]
    assert all(d % 4 == 0 for d in dims)
    assert all(abs(d - s) <= 2 for d, s in zip(dims[:3], sizes.tolist()))  # nearest multiple, min one step
    assert torchrec_md.power_law_dims_multiple_of(popularity, alpha=0.0, base_dim=64) == [64] * 4


def test_power_law_dims_multiple_of_from_a_budget_is_close_to_it():
    blocking = equipartition_blocks(COUNTS, 6)
    budget = 4000
    dims = torchrec_md.power_law_dims_multiple_of(blocking.popularity, alpha=0.4, budget=budget, rows=blocking.rows)
    assert all(d % 4 == 0 for d in dims)
    total = sum(n * d for n, d in zip(blocking.rows, dims))
    assert abs(total - budget) <= 2 * sum(blocking.rows)


def test_round_dims_to_multiple_bounds():
    assert torchrec_md.round_dims_to_multiple([1.0, 6.0, 10.0, 40.0], max_dim=32) == [4, 8, 12, 32]
    assert torchrec_md.round_dims_to_multiple([3.0, 9.0], multiple_of=8) == [8, 8]
    with pytest.raises(EmbregError, match="max_dim"):
        torchrec_md.round_dims_to_multiple([3.0], min_dim=9, max_dim=8)


def test_from_frequencies_gives_dims_divisible_by_4_and_a_working_layer():
    torch.manual_seed(0)
    trec = TorchRecMixedDimensionEmbedding.from_frequencies(COUNTS, num_blocks=5, alpha=0.6, budget=3000)
    assert all(d % 4 == 0 for d in trec.block_dims)
    assert all(c.embedding_dim % 4 == 0 for c in trec.ebc.embedding_bag_configs())
    assert trec.embedding_dim == max(trec.block_dims)
    assert trec(torch.tensor([0, 399])).shape == (2, trec.embedding_dim)


def test_base_dim_not_a_multiple_is_refused():
    with pytest.raises(EmbregError, match="base_dim=30 must be a multiple of multiple_of=4"):
        torchrec_md.power_law_dims_multiple_of([1.0, 0.1], alpha=0.5, base_dim=30)


# ------------------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize("bad", [-1, 400])
def test_ids_outside_the_range_raise_naming_the_id(bad):
    trec = TorchRecMixedDimensionEmbedding.from_mixed_dimension(_embreg_layer())
    with pytest.raises(EmbregError, match=rf"holds the id {bad}; valid ids are in \[0, 399\]"):
        trec(torch.tensor([0, bad]))
    with pytest.raises(EmbregError, match=rf"holds the id {bad}"):
        trec(_kjt([0, bad], [1, 1]))


def test_bad_inputs_and_settings_raise_clear_errors():
    trec = TorchRecMixedDimensionEmbedding([4, 8], [8, 4], base_dim=8, feature="item")
    with pytest.raises(EmbregError, match="integer dtype"):
        trec(torch.tensor([0.0, 1.0]))
    with pytest.raises(EmbregError, match="this layer reads 'item'"):
        trec(_kjt([0], [1], key="user"))
    with pytest.raises(EmbregError, match="outside the valid range"):
        TorchRecMixedDimensionEmbedding([4], [12], base_dim=8)
    with pytest.raises(EmbregError, match="Python identifier"):
        TorchRecMixedDimensionEmbedding([4], [8], base_dim=8, feature="a.b")
    with pytest.raises(EmbregError, match="pooling="):
        TorchRecMixedDimensionEmbedding([4], [8], base_dim=8, pooling="max")
    with pytest.raises(EmbregError, match="permutation"):
        TorchRecMixedDimensionEmbedding([2, 2], [8, 4], base_dim=8, index_map=torch.tensor([0, 0, 1, 2]))
    with pytest.raises(EmbregError, match="no EBC form"):
        TorchRecMixedDimensionEmbedding.from_mixed_dimension(
            MixedDimensionEmbeddingBag([4], [8], base_dim=8, mode="max")
        )


def test_empty_ids_give_an_empty_output():
    trec = TorchRecMixedDimensionEmbedding([4, 8], [8, 4], base_dim=8)
    assert trec(torch.zeros(0, 3, dtype=torch.int64)).shape == (0, 3, 8)


def test_table_wise_plan_places_blocks_round_robin():
    trec = TorchRecMixedDimensionEmbedding([4, 8, 16], [8, 4, 4], base_dim=8)
    plan = torchrec_md.table_wise_plan(trec, 2, path="user")
    module_plan = plan.get_plan_for_module("user.ebc")
    assert {name: p.ranks for name, p in module_plan.items()} == {
        "ids_block0": [0],
        "ids_block1": [1],
        "ids_block2": [0],
    }
    assert all(p.sharding_type == "table_wise" for p in module_plan.values())
    with pytest.raises(EmbregError, match="ranks has 2 entries"):
        torchrec_md.table_wise_plan(trec, 2, ranks=[0, 1])


def test_docstring_examples_run():
    import doctest

    result = doctest.testmod(torchrec_md, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, result

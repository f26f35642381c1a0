"""MixedDimensionEmbedding: drop-in behaviour, reference lookup (Alg. 2), gradients, sparse mode, bad ids, SSE."""

import pytest
import torch
from torch import nn

from embreg.embeddings import MixedDimensionEmbedding, equipartition_blocks
from embreg.errors import EmbregError
from embreg.sse import SSE, SSEEmbedding

pytestmark = pytest.mark.usefixtures("md_backend")  # every test on both lookup backends


def _reference(layer: MixedDimensionEmbedding, ids: torch.Tensor) -> torch.Tensor:
    """Alg. 2 literally: scan the offsets for each id, then E_i[x - t] @ P_i."""
    out = []
    for caller_id in ids.reshape(-1).tolist():
        x = caller_id if layer.index_map is None else int(layer.index_map[caller_id])
        i, t = 0, 0
        while t + layer.block_rows[i] <= x:
            t += layer.block_rows[i]
            i += 1
        block = layer.blocks[i]
        row = block.weight[x - t]
        out.append(row if block.projection is None else row @ block.projection)
    return torch.stack(out).reshape(*ids.shape, layer.embedding_dim)


def _layer(**kwargs) -> MixedDimensionEmbedding:
    torch.manual_seed(0)
    freq = torch.tensor([50.0, 1, 7, 3, 30, 0, 2, 12, 1, 5, 9, 4])
    return MixedDimensionEmbedding.from_blocking(equipartition_blocks(freq, 3), [8, 4, 2], 8, **kwargs)


def test_matches_the_literal_alg2_reference_on_any_shape():
    layer = _layer()
    ids = torch.randint(0, 12, (3, 5, 2))
    out = layer(ids)
    assert out.shape == (3, 5, 2, 8)
    assert torch.allclose(out, _reference(layer, ids), atol=1e-6)
    assert torch.allclose(layer.materialize(), _reference(layer, torch.arange(12)), atol=1e-6)


def test_all_dims_at_base_with_identity_projections_equals_nn_embedding():
    torch.manual_seed(1)
    plain = nn.Embedding(20, 6)
    freq = torch.rand(20)
    blocking = equipartition_blocks(freq, 4)
    layer = MixedDimensionEmbedding.from_blocking(blocking, [6, 6, 6, 6], 6)
    assert all(block.projection is None for block in layer.blocks) and layer.flat_projections is None
    with torch.no_grad():
        table = plain.weight[blocking.permutation]  # rows in blocked order
        for block, start, stop in zip(layer.blocks, blocking.offsets, blocking.offsets[1:]):
            block.weight.copy_(table[start:stop])
    ids = torch.randint(0, 20, (7, 3))
    assert torch.equal(layer(ids), plain(ids))
    assert layer.num_parameters == sum(p.numel() for p in plain.parameters()) == layer.uniform_num_parameters


def test_gradients_reach_every_block_and_projection():
    layer = _layer()
    layer(torch.arange(12)).pow(2).sum().backward()
    for i, block in enumerate(layer.blocks):
        assert block.weight_grad is not None and block.weight_grad.abs().sum() > 0, i
        if block.projection is not None:
            assert block.projection_grad is not None and block.projection_grad.abs().sum() > 0, i
    assert sum(block.projection is not None for block in layer.blocks) == 2


def test_two_flat_parameters_hold_every_block():
    layer = _layer()
    assert [name for name, _ in layer.named_parameters()] == ["flat_rows", "flat_projections"]
    assert layer.flat_rows.shape == (sum(n * d for n, d in zip(layer.block_rows, (8, 4, 2))),)
    assert layer.flat_projections.shape == ((4 + 2) * 8,)
    with torch.no_grad():
        layer.blocks[2].weight[0].fill_(7.0)  # the blocks are views: writes reach the parameter
    start = layer.block_rows[0] * 8 + layer.block_rows[1] * 4
    assert torch.equal(layer.flat_rows[start : start + 2], torch.full((2,), 7.0))


def test_initialisation_draws_block_by_block_as_separate_tables():
    torch.manual_seed(5)
    layer = MixedDimensionEmbedding([3, 40, 60], [16, 5, 2], 16, init_std=0.5)
    torch.manual_seed(5)
    for block, (n, d) in zip(layer.blocks, [(3, 16), (40, 5), (60, 2)]):
        assert torch.equal(block.weight, torch.empty(n, d).normal_(std=0.5))
        if d != 16:
            assert torch.equal(block.projection, torch.empty(d, 16).normal_(std=d**-0.5))


def test_a_per_block_checkpoint_loads_into_the_flat_parameters():
    layer = _layer()
    old = {"index_map": layer.index_map.clone()}
    for i, block in enumerate(layer.blocks):  # the state dict of embreg's layer before the flat storage
        old[f"blocks.{i}.weight"] = block.weight.detach().clone()
        if block.projection is not None:
            old[f"blocks.{i}.projection"] = block.projection.detach().clone()
    fresh = MixedDimensionEmbedding(layer.block_rows, [8, 4, 2], 8, index_map=torch.arange(12))
    fresh.load_state_dict(old)
    ids = torch.arange(12)
    assert torch.equal(fresh(ids), layer(ids))
    old["blocks.1.weight"] = old["blocks.1.weight"][:, :3]
    with pytest.raises(EmbregError, match=r"'blocks.1.weight' is shape \(\d+, 3\); this layer needs shape"):
        fresh.load_state_dict(old)


def test_only_looked_up_rows_get_gradient_and_projection_gradient_is_exact():
    layer = _layer()
    ids = torch.tensor([1])  # one rare id
    position = int(layer.index_map[1])
    layer(ids).sum().backward()
    block_index = int(torch.searchsorted(layer.offsets[1:], torch.tensor(position), right=True))
    block = layer.blocks[block_index]
    local = position - int(layer.offsets[block_index])
    rows_with_grad = block.weight_grad.abs().sum(-1).nonzero().flatten().tolist()
    assert rows_with_grad == [local]
    assert torch.count_nonzero(layer.flat_rows.grad) == block.weight.shape[1]  # no other block's rows either
    if block.projection is not None:
        expected = block.weight[local].detach().unsqueeze(-1).expand(-1, 8)  # d(sum(e @ P)) / dP = e^T 1
        assert torch.allclose(block.projection_grad, expected)


def test_sparse_gradients_are_sparse_and_equal_the_dense_ones():
    dense, sparse = _layer(), _layer(sparse=True)
    ids = torch.tensor([0, 4, 4, 11, 5])
    dense(ids).pow(2).sum().backward()
    sparse(ids).pow(2).sum().backward()
    assert sparse.flat_rows.grad.is_sparse and not sparse.flat_projections.grad.is_sparse
    assert torch.allclose(sparse.flat_rows.grad.to_dense(), dense.flat_rows.grad, atol=1e-6)
    assert torch.allclose(sparse.flat_projections.grad, dense.flat_projections.grad, atol=1e-6)
    # one entry per value of each distinct looked-up row: ids 0, 4, 11, 5 (4 repeats)
    widths = [layer_block.weight.shape[1] for layer_block in sparse.blocks]
    blocks_of = torch.searchsorted(sparse.offsets[1:], sparse.positions(torch.tensor([0, 4, 11, 5])), right=True)
    assert sparse.flat_rows.grad._nnz() == sum(widths[b] for b in blocks_of.tolist())
    torch.optim.SparseAdam([sparse.flat_rows], lr=0.1).step()  # the optimizer sparse tables are meant for


def test_parameter_count_is_exact():
    layer = _layer()
    assert layer.num_parameters == sum(p.numel() for p in layer.parameters())
    assert layer.num_parameters == 12 * 0 + sum(n * d for n, d in zip(layer.block_rows, (8, 4, 2))) + 4 * 8 + 2 * 8


@pytest.mark.parametrize("bad", [12, -1, 100])
def test_out_of_range_ids_name_the_value_and_range(bad):
    with pytest.raises(EmbregError, match=rf"id {bad}; valid ids are in \[0, 11\]"):
        _layer()(torch.tensor([0, bad]))


def test_bad_construction_is_named():
    with pytest.raises(EmbregError, match=r"block_dims\[1\]=9 is outside the valid range \[1, base_dim=8\]"):
        MixedDimensionEmbedding([3, 4], [8, 9], 8)
    with pytest.raises(EmbregError, match="must match"):
        MixedDimensionEmbedding([3, 4], [8], 8)
    with pytest.raises(EmbregError, match="permutation"):
        MixedDimensionEmbedding([2, 2], [4, 2], 4, index_map=torch.tensor([0, 0, 1, 2]))
    with pytest.raises(EmbregError, match="integer dtype"):
        _layer()(torch.tensor([0.0]))


def test_state_dict_round_trip_keeps_the_index_map():
    a = _layer()
    b = MixedDimensionEmbedding(a.block_rows, [8, 4, 2], 8, index_map=torch.arange(12))
    assert not torch.equal(a(torch.arange(12)), b(torch.arange(12)))
    b.load_state_dict(a.state_dict())
    ids = torch.arange(12)
    assert torch.equal(a(ids), b(ids))


def test_sse_wraps_a_mixed_dimension_layer():
    layer = _layer()
    wrapped = SSEEmbedding(layer, SSE(12, p=1.0, seed=0))
    ids = torch.zeros(200, dtype=torch.int64)
    out = wrapped(ids)
    assert out.shape == (200, 8)
    assert not torch.allclose(out, layer(ids))  # every id swapped in training
    wrapped(ids).sum().backward()
    # id 0 is alone in the most popular block; with p = 1 it is always swapped away, so that block gets no gradient
    assert layer.block_rows[0] == 1 and not layer.blocks[0].weight_grad.any()
    assert all(block.weight_grad.any() for block in layer.blocks[1:])
    wrapped.eval()
    assert torch.equal(wrapped(ids), layer(ids))


@pytest.mark.parametrize("sparse", [False, True])
def test_fused_lookup_matches_the_reference_in_values_and_gradients(sparse):
    """The one-node lookup (distinct rows, hand-written backward) against the per-block autograd reference:
    repeated ids, an unused block, identity and projected blocks, float64."""
    from embreg.embeddings.functional import mixed_dimension_lookup, mixed_dimension_lookup_reference

    torch.manual_seed(3)
    rows, dims, base = [5, 7, 4, 9, 6], [6, 4, 3, 6, 1], 6
    offsets = torch.tensor([0, *torch.tensor(rows).cumsum(0).tolist()])
    positions = torch.tensor([[0, 4, 4, 30], [10, 10, 10, 0], [21, 29, 5, 11]])  # none in block 2 (rows 12..15)
    grad_out = torch.randn(3, 4, base, dtype=torch.float64)
    results = []
    for lookup in (mixed_dimension_lookup, mixed_dimension_lookup_reference):
        torch.manual_seed(4)
        weights = [torch.randn(n, d, dtype=torch.float64, requires_grad=True) for n, d in zip(rows, dims)]
        projections = [
            None if d == base else torch.randn(d, base, dtype=torch.float64, requires_grad=True) for d in dims
        ]
        out = lookup(positions, weights, projections, offsets, sparse=sparse)
        (out * grad_out).sum().backward()
        results.append((out.detach(), [w.grad for w in weights], [p if p is None else p.grad for p in projections]))
    (fast, fast_w, fast_p), (ref, ref_w, ref_p) = results
    assert torch.allclose(fast, ref)
    for a, b in zip(fast_w, ref_w):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.is_sparse == sparse == b.is_sparse
            assert torch.allclose(a.to_dense(), b.to_dense())
    assert fast_w[2] is None  # the unused block gets no gradient, as with nn.Embedding ops never called
    for a, b in zip(fast_p, ref_p):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.allclose(a, b)


def test_fused_lookup_on_an_empty_batch_and_in_no_grad():
    layer = _layer(sparse=True)
    assert layer(torch.zeros(0, 3, dtype=torch.int64)).shape == (0, 3, 8)
    ids = torch.tensor([[3, 3, 7], [0, 11, 3]])
    with torch.no_grad():
        assert torch.allclose(layer(ids), _reference(layer, ids), atol=1e-6)


def test_fused_lookup_refuses_second_derivatives_instead_of_getting_them_wrong():
    layer = _layer()
    out = layer(torch.arange(12))
    # the tensor-op node raises when its gradient is differentiated, the C++ node as soon as that graph is asked for
    with pytest.raises(RuntimeError, match="once_differentiable|first derivatives only"):
        (grad,) = torch.autograd.grad(out.pow(2).sum(), layer.flat_rows, create_graph=True)
        grad.sum().backward()


@pytest.mark.parametrize("sparse", [False, True])
def test_flat_parameter_gradients_equal_those_of_separate_tables(sparse):
    """The layer's two flat parameters get, block by block, the gradients that k separate tables and
    projections get from the per-block reference lookup (float64: the tensor-op node on either backend)."""
    from embreg.embeddings.functional import mixed_dimension_lookup_reference

    layer = _layer(sparse=sparse, dtype=torch.float64)
    ids = torch.tensor([[0, 4, 4, 11], [5, 5, 2, 0]])
    grad_out = torch.randn(2, 4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    (layer(ids) * grad_out).sum().backward()
    weights = [b.weight.detach().clone().requires_grad_() for b in layer.blocks]
    projections = [
        None if b.projection is None else b.projection.detach().clone().requires_grad_() for b in layer.blocks
    ]
    (
        mixed_dimension_lookup_reference(layer.positions(ids), weights, projections, layer.offsets) * grad_out
    ).sum().backward()
    assert layer.flat_rows.grad.is_sparse == sparse
    for block, weight, projection in zip(layer.blocks, weights, projections):
        torch.testing.assert_close(block.weight_grad, weight.grad)
        if projection is not None:
            torch.testing.assert_close(block.projection_grad, projection.grad)

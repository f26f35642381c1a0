"""The fused C++ mixed-dimension lookup: same values and gradients as the tensor-op lookup, its own edge cases."""

from __future__ import annotations

import pytest
import torch

from embreg.embeddings import MixedDimensionEmbedding, _kernel, flat
from embreg.errors import EmbregError
from tests.helpers.md_kernel_cases import small_layer as _layer
from tests.helpers.md_kernel_cases import values_and_grads as _value_and_grads
from tests.helpers.native_backends import require_kernel


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch):
    return require_kernel(monkeypatch, "EMBREG_MD_KERNEL", _kernel.fused_kernel)


def _flat(layer: MixedDimensionEmbedding):
    return layer.flat_rows, layer.flat_projections


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("map_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize(
    "dims",
    [
        (16, 9, 4, 1),
        (32, 20, 3),
        (64, 40, 17, 3),
        (128, 70, 9, 1),  # fixed widths
        (12, 5, 2),
    ],
)  # any other width
def test_values_and_gradients_match_the_tensor_op_lookup(
    kernel, sparse: bool, map_dtype: torch.dtype, dims: tuple[int, ...]
) -> None:
    layer = _layer(sparse, dims=dims)
    layer.index_map = layer.index_map.to(map_dtype)
    ids = torch.randint(0, 300, (37, 11), generator=torch.Generator().manual_seed(1))  # repeats within the batch
    upstream = torch.randn(37, 11, dims[0], generator=torch.Generator().manual_seed(2))
    out, grads = _value_and_grads(layer, ids, upstream, fused=True)
    ref_out, ref_grads = _value_and_grads(layer, ids, upstream, fused=False)
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, ref_grads):
        assert (got is None) == (want is None)
        if got is not None:
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_sparse_gradient_has_one_entry_per_value_of_each_distinct_row(kernel) -> None:
    layer = _layer(sparse=True)
    ids = torch.tensor([5, 5, 5, 17, 5, 299, 17])
    layer(ids).sum().backward()
    grad = layer.flat_rows.grad
    assert grad.is_sparse and grad.shape == layer.flat_rows.shape and not grad.is_coalesced()
    block_of = torch.searchsorted(layer.offsets[1:], layer.positions(torch.tensor([5, 17, 299])), right=True)
    assert grad._nnz() == sum(layer.block_dims[b] for b in block_of.tolist())
    indices = grad._indices()[0]
    assert indices.numel() == indices.unique().numel()  # distinct, so SGD and SparseAdam need no merging


def test_strided_upstream_gradient_of_a_sum(kernel) -> None:
    layer = _layer()
    ids = torch.randint(0, 300, (500,), generator=torch.Generator().manual_seed(3))
    ones = torch.ones(500, 16)
    _, grads = _value_and_grads(layer, ids, ones, fused=True)  # a contiguous upstream
    for p in layer.parameters():
        p.grad = None
    layer(ids).sum().backward()  # the sum's upstream is an expanded (stride 0) tensor
    for p, want in zip(layer.parameters(), grads):
        torch.testing.assert_close(p.grad, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sparse", [False, True])
def test_column_strided_upstream_gradient(kernel, sparse: bool) -> None:
    layer = _layer(sparse, dims=(64, 40, 17, 3))
    ids = torch.randint(0, 300, (200,), generator=torch.Generator().manual_seed(4))
    upstream = torch.randn(64, 200, generator=torch.Generator().manual_seed(5)).t()  # strides (1, 200)
    _, got = _value_and_grads(layer, ids, upstream, fused=True)
    _, want = _value_and_grads(layer, ids, upstream.contiguous(), fused=False)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_a_block_with_no_id_gets_a_zero_gradient(kernel) -> None:
    layer = _layer()
    last_block_start = int(layer.offsets[-2])
    popular = torch.nonzero(layer.index_map < last_block_start).flatten()[:20]
    layer(popular).sum().backward()
    assert not layer.blocks[-1].weight_grad.any() and not layer.blocks[-1].projection_grad.any()
    assert layer.blocks[1].weight_grad.any()


def test_out_of_range_ids_name_the_value(kernel) -> None:
    layer = _layer()
    with pytest.raises(EmbregError, match=r"holds the id 300; valid ids are in \[0, 299\]"):
        layer(torch.tensor([1, 300, 2]))
    with pytest.raises(EmbregError, match=r"holds the id -1"):
        layer(torch.tensor([[-1, 0]]))
    with pytest.raises(RuntimeError, match=r"found id 300; valid range is \[0, 300\)"):
        flat.flat_mixed_dimension_lookup(
            torch.tensor([300]), *_flat(layer), *layer.layout[:2], layer.offsets, layer.embedding_dim
        )


def test_integer_id_dtypes_and_shapes(kernel) -> None:
    layer = _layer()
    ids = torch.randint(0, 300, (4, 3, 2))
    expected = layer(ids)
    assert expected.shape == (4, 3, 2, 16)
    torch.testing.assert_close(layer(ids.to(torch.int32)), expected)
    torch.testing.assert_close(layer(ids.transpose(0, 2)), expected.transpose(0, 2))  # non-contiguous ids


def test_small_integer_id_dtypes_are_served_by_the_kernel(kernel) -> None:
    layer = _layer()
    ids = torch.randint(0, 120, (9, 2), generator=torch.Generator().manual_seed(5))
    expected = layer(ids)
    for dtype in (torch.int16, torch.int8, torch.uint8):
        out = _kernel.fused_lookup(
            ids.to(dtype),
            layer.index_map,
            layer.offsets,
            *_flat(layer),
            layer.block_dims,
            layer.embedding_dim,
            sparse=False,
        )
        assert out is not None, dtype
        torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.uint16])
def test_ids_the_kernel_does_not_serve_get_the_layers_error(kernel, dtype: torch.dtype) -> None:
    layer = _layer()
    ids = torch.tensor([0, 1]).to(dtype)
    assert (
        _kernel.fused_lookup(
            ids, layer.index_map, layer.offsets, *_flat(layer), layer.block_dims, layer.embedding_dim, sparse=False
        )
        is None
    )
    with pytest.raises(EmbregError, match=f"ids must have an integer dtype, got {dtype}"):
        layer(ids)


def test_an_empty_batch_is_left_to_the_tensor_ops(kernel) -> None:
    layer = _layer(sparse=True)
    empty = torch.zeros(0, 3, dtype=torch.int64)
    assert (
        _kernel.fused_lookup(
            empty, layer.index_map, layer.offsets, *_flat(layer), layer.block_dims, layer.embedding_dim, sparse=True
        )
        is None
    )
    assert layer(empty).shape == (0, 3, 16)


def test_a_layer_without_projections_runs_in_the_kernel(kernel) -> None:
    layer = _layer(dims=(8, 8, 8))
    assert layer.flat_projections is None
    ids = torch.tensor([[0, 299], [5, 5]])
    out = _kernel.fused_kernel().lookup(
        ids, layer.index_map, layer.offsets, False, layer.flat_rows, None, layer.block_dims, layer.embedding_dim
    )
    assert out is not None and out.grad_fn is not None
    torch.testing.assert_close(out, layer.flat_rows.view(-1, 8)[layer.positions(ids)])
    out.sum().backward()
    assert layer.flat_rows.grad.view(-1, 8).sum(1).count_nonzero() == 3  # three distinct rows


class _Doubled(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * x


def test_parametrized_tables_are_read_through_the_parametrization(kernel) -> None:
    """A parametrization moves ``flat_rows`` out of the layer's parameter dict; the layer then reads it as an
    attribute (through the parametrization), not from the dict."""
    layer = _layer()
    ids = torch.randint(0, 300, (20,), generator=torch.Generator().manual_seed(6))
    expected = layer(ids).detach()
    torch.nn.utils.parametrize.register_parametrization(layer, "flat_rows", _Doubled())
    out = layer(ids)
    torch.testing.assert_close(out, 2 * expected)  # the lookup is linear in the rows
    out.sum().backward()
    assert layer.parametrizations.flat_rows.original.grad is not None


def test_float64_tables_take_the_tensor_ops(kernel) -> None:
    layer = _layer(dtype=torch.float64)
    assert not _kernel.kernel_applies(*_flat(layer))
    assert (
        _kernel.fused_lookup(
            torch.tensor([0]), None, layer.offsets, *_flat(layer), layer.block_dims, layer.embedding_dim, sparse=False
        )
        is None
    )
    assert layer(torch.tensor([0, 299])).dtype == torch.float64
    assert _kernel.kernel_applies(*_flat(_layer()))


def test_a_layout_that_does_not_fit_the_parameters_is_refused(kernel) -> None:
    layer = _layer()
    with pytest.raises(RuntimeError, match="the flat rows hold .* values; the blocks need"):
        _kernel.fused_lookup(
            torch.tensor([0]),
            None,
            layer.offsets,
            layer.flat_rows[:-1],
            layer.flat_projections,
            layer.block_dims,
            layer.embedding_dim,
            sparse=False,
        )
    with pytest.raises(RuntimeError, match=r"block 1 has dim 17; valid range is \[1, 16\]"):
        _kernel.fused_lookup(
            torch.tensor([0]), None, layer.offsets, *_flat(layer), (16, 17, 4, 1), layer.embedding_dim, sparse=False
        )


def test_sparse_adam_trains_through_the_kernel(kernel) -> None:
    layer = _layer(sparse=True)
    optimizer = torch.optim.SparseAdam([layer.flat_rows], lr=0.1)
    ids = torch.randint(0, 300, (64,), generator=torch.Generator().manual_seed(4))
    target = torch.randn(64, 16, generator=torch.Generator().manual_seed(5))
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = (layer(ids) - target).pow(2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def test_off_mode_and_unknown_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBREG_MD_KERNEL", "off")
    assert _kernel.fused_kernel() is None and not _kernel.kernel_applies(*_flat(_layer()))
    monkeypatch.setenv("EMBREG_MD_KERNEL", "fast")
    with pytest.raises(EmbregError, match="EMBREG_MD_KERNEL='fast' is not one of auto, off, on"):
        _kernel.fused_kernel()

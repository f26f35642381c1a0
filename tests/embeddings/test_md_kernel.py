"""The fused C++ mixed-dimension lookup: same values and gradients as the tensor-op lookup, its own edge cases."""

from __future__ import annotations

import pytest
import torch
from _native_backends import require_kernel

from embreg.embeddings import MixedDimensionEmbedding, equipartition_blocks, functional
from embreg.embeddings import _kernel
from embreg.errors import EmbregError


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch):
    return require_kernel(monkeypatch, "EMBREG_MD_KERNEL", _kernel.fused_kernel)


def _layer(sparse: bool = False, rows: int = 300, dims=(16, 9, 4, 1), dtype=torch.float32) -> MixedDimensionEmbedding:
    torch.manual_seed(0)
    freq = torch.arange(rows, 0, -1, dtype=torch.float64) ** -1.1
    blocking = equipartition_blocks(freq[torch.randperm(rows)], len(dims))
    return MixedDimensionEmbedding.from_blocking(blocking, list(dims), dims[0], sparse=sparse, dtype=dtype)


def _tables(layer: MixedDimensionEmbedding):
    return [b.weight for b in layer.blocks], [b.projection for b in layer.blocks]


def _value_and_grads(layer: MixedDimensionEmbedding, ids: torch.Tensor, upstream: torch.Tensor, fused: bool):
    """Output and every parameter's (dense) gradient, through the kernel or through the tensor-op node."""
    for p in layer.parameters():
        p.grad = None
    weights, projections = _tables(layer)
    if fused:
        out = _kernel.fused_lookup(ids, layer.index_map, weights, projections, layer.offsets, sparse=layer.sparse)
    else:
        positions = layer.positions(ids).reshape(-1)
        out = functional._MixedDimensionLookup.apply(positions, layer.offsets, layer.sparse, len(weights),
                                                     *weights, *projections).reshape(*ids.shape, -1)
    (out * upstream).sum().backward()
    grads = [None if p.grad is None else (p.grad.to_dense() if p.grad.is_sparse else p.grad)
             for p in layer.parameters()]
    return out.detach(), grads


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("map_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dims", [(16, 9, 4, 1), (64, 40, 17, 3), (12, 5, 2)])  # fixed-width paths; any width
def test_values_and_gradients_match_the_tensor_op_lookup(kernel, sparse: bool, map_dtype: torch.dtype,
                                                         dims: tuple[int, ...]) -> None:
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


def test_sparse_gradients_have_one_row_per_distinct_id(kernel) -> None:
    layer = _layer(sparse=True)
    ids = torch.tensor([5, 5, 5, 17, 5, 299, 17])
    layer(ids).sum().backward()
    for block, count in zip(layer.blocks, (layer.positions(ids).unsqueeze(1) >= layer.offsets[:-1]).sum(0)):
        grad = block.weight.grad
        if grad is None:
            continue
        assert grad.is_sparse and grad.shape == block.weight.shape
        indices = grad._indices()[0]
        assert indices.numel() == indices.unique().numel()  # distinct, so SGD and SparseAdam need no merging


def test_strided_upstream_gradient_of_a_sum(kernel) -> None:
    layer = _layer()
    ids = torch.randint(0, 300, (500,), generator=torch.Generator().manual_seed(3))
    ones = torch.ones(500, 16)
    _, grads = _value_and_grads(layer, ids, ones, fused=True)  # (out * ones).sum(): a contiguous upstream
    for p in layer.parameters():
        p.grad = None
    layer(ids).sum().backward()  # the sum's upstream is an expanded (stride 0) tensor
    for p, want in zip(layer.parameters(), grads):
        torch.testing.assert_close(p.grad, want, rtol=1e-4, atol=1e-4)


def test_a_block_with_no_id_gets_no_gradient(kernel) -> None:
    layer = _layer()
    last_block_start = int(layer.offsets[-2])
    popular = torch.nonzero(layer.index_map < last_block_start).flatten()[:20]
    layer(popular).sum().backward()
    assert layer.blocks[-1].weight.grad is None and layer.blocks[-1].projection.grad is None
    assert layer.blocks[1].weight.grad is not None


def test_out_of_range_ids_name_the_value(kernel) -> None:
    layer = _layer()
    with pytest.raises(EmbregError, match=r"holds the id 300; valid ids are in \[0, 299\]"):
        layer(torch.tensor([1, 300, 2]))
    with pytest.raises(EmbregError, match=r"holds the id -1"):
        layer(torch.tensor([[-1, 0]]))
    weights, projections = _tables(layer)
    with pytest.raises(RuntimeError, match=r"found id 300; valid range is \[0, 300\)"):
        functional.mixed_dimension_lookup(torch.tensor([300]), weights, projections, layer.offsets)


def test_integer_id_dtypes_and_shapes(kernel) -> None:
    layer = _layer()
    ids = torch.randint(0, 300, (4, 3, 2))
    expected = layer(ids)
    assert expected.shape == (4, 3, 2, 16)
    torch.testing.assert_close(layer(ids.to(torch.int32)), expected)
    torch.testing.assert_close(layer(ids.transpose(0, 2)), expected.transpose(0, 2))  # non-contiguous ids


def test_float64_tables_take_the_tensor_ops(kernel) -> None:
    layer = _layer(dtype=torch.float64)
    assert not _kernel.kernel_applies(*_tables(layer))
    assert _kernel.fused_lookup(torch.tensor([0]), None, *_tables(layer), layer.offsets, sparse=False) is None
    assert layer(torch.tensor([0, 299])).dtype == torch.float64
    assert _kernel.kernel_applies(*_tables(_layer()))


def test_sparse_adam_trains_through_the_kernel(kernel) -> None:
    layer = _layer(sparse=True)
    optimizer = torch.optim.SparseAdam([b.weight for b in layer.blocks], lr=0.1)
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
    assert _kernel.fused_kernel() is None and not _kernel.kernel_applies(*_tables(_layer()))
    monkeypatch.setenv("EMBREG_MD_KERNEL", "fast")
    with pytest.raises(EmbregError, match="EMBREG_MD_KERNEL='fast' is not one of auto, off, on"):
        _kernel.fused_kernel()

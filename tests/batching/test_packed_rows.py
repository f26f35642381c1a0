"""PackedRows: one gather of row-packed bytes equals indexing every tensor on its own."""

from __future__ import annotations

import pytest
import torch

from embreg.batching.packed_rows import PackedRows


def test_gather_equals_indexing_each_tensor_for_mixed_dtypes_and_shapes() -> None:
    g = torch.Generator().manual_seed(0)
    tensors = {
        "flag": torch.rand(50, generator=g) > 0.5,  # 1 byte, then an 8-byte column that must be aligned
        "user": torch.randint(-(2**40), 2**40, (50,), generator=g),
        "small": torch.randint(0, 100, (50,), generator=g).to(torch.int16),
        "dense": torch.randn(50, 3, 2, generator=g),
        "rating": torch.randn(50, generator=g).double(),
    }
    rows = PackedRows(tensors)
    index = torch.tensor([49, 0, 7, 7, 23])
    got = rows.gather(index)
    assert list(got) == list(tensors)
    for name, tensor in tensors.items():
        assert got[name].dtype == tensor.dtype and got[name].is_contiguous()
        assert torch.equal(got[name], tensor[index]), name
    assert rows.packed.shape[1] % 8 == 0 and len(rows) == 50


def test_non_contiguous_inputs_and_an_empty_index() -> None:
    base = torch.arange(40).reshape(10, 4)
    tensors = {"column": base[:, 1], "rows": base.t().contiguous().t()}
    got = PackedRows(tensors).gather(torch.tensor([3, 1]))
    assert got["column"].tolist() == [13, 5] and got["rows"].tolist() == [[12, 13, 14, 15], [4, 5, 6, 7]]
    assert PackedRows(tensors).gather(torch.tensor([], dtype=torch.long))["rows"].shape == (0, 4)


def test_only_cpu_tensors_are_packed() -> None:
    meta = torch.empty(3, device="meta")
    with pytest.raises(ValueError, match="CPU tensors"):
        PackedRows({"x": meta, "y": meta})

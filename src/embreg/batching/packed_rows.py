"""Row-packed example tensors: every tensor's bytes of one example side by side, so one gather fetches them all.

Shuffling an epoch gathers each tensor in permuted order. On the CPU each of those random reads waits for memory
(10^7 ratings: about 50 ns per read, one per tensor per example), so three tensors cost three times one. Packed
into one ``(N, W)`` byte matrix, an example's values share a cache line and one ``index_select`` of rows reads
them together; each gathered chunk is then split back into contiguous tensors of the original dtypes and shapes.
The packed copy costs the examples' memory once more (rows padded to 8 bytes).

Example:
    >>> rows = PackedRows({"user": torch.tensor([5, 6, 7]), "rating": torch.tensor([1.5, 2.5, 3.5])})
    >>> batch = rows.gather(torch.tensor([2, 0]))
    >>> batch["user"].tolist(), batch["rating"].tolist()
    ([7, 5], [3.5, 1.5])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["PackedRows"]


@dataclass(frozen=True)
class _Column:
    name: str
    offset: int  # first byte of the column in a packed row (a multiple of its element size)
    width: int  # bytes of one example's values
    dtype: torch.dtype
    shape: tuple[int, ...]  # one example's shape
    itemsize: int


_WORDS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
"""The integer dtype of each element size, to move a column's bytes in whole elements."""


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


class PackedRows:
    """The examples of equally long CPU tensors, packed row by row into one byte matrix.

    Args:
        tensors: named tensors whose first dimension is the example axis, all of length ``N``, on the CPU.

    Shapes:
        ``tensors[name]``: ``(N, *shape)`` -> :meth:`gather` ``(len(index), *shape)``, same dtype.
    """

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        columns, offset = [], 0
        for name, tensor in tensors.items():
            if tensor.device.type != "cpu":
                raise ValueError(f"PackedRows takes CPU tensors; {name!r} is on {tensor.device}")
            item = tensor.element_size()
            offset = _round_up(offset, item)
            width = item * (tensor[0].numel() if tensor.dim() > 1 else 1)
            columns.append(_Column(name, offset, width, tensor.dtype, tuple(tensor.shape[1:]), item))
            offset += width
        n = next(iter(tensors.values())).shape[0]
        self.packed = torch.empty((n, _round_up(max(offset, 1), 8)), dtype=torch.uint8)
        for column in columns:
            values = tensors[column.name].contiguous().reshape(n, -1).view(torch.uint8)
            self.packed[:, column.offset : column.offset + column.width] = values
        self.columns = columns

    def __len__(self) -> int:
        return self.packed.shape[0]

    def gather(self, index: torch.Tensor, *, pin_memory: bool = False) -> dict[str, torch.Tensor]:
        """The examples at ``index`` (1-d int64), each tensor contiguous (in page-locked memory with
        ``pin_memory``)."""
        rows = self.packed.index_select(0, index)
        n = rows.shape[0]
        out = {}
        for c in self.columns:
            # copied as integers of the column's element size (rows are 8-byte multiples, columns aligned), not
            # byte by byte
            words = _WORDS[c.itemsize]
            values = torch.empty((n, *c.shape), dtype=c.dtype, pin_memory=pin_memory)
            start, count = c.offset // c.itemsize, c.width // c.itemsize
            values.view(n, count).view(words).copy_(rows.view(words)[:, start : start + count])
            out[c.name] = values
        return out

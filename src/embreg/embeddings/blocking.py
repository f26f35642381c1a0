"""Blocking: which rows of an embedding table share a dimension (mixed-dimension-embeddings.txt, Sec. III).

Two schemes, both pure functions of *real* query frequencies (how often each row was looked up in the training
data), never of row counts alone:

* :func:`equipartition_blocks` (Appendix, Alg. 3, for tables such as users or items of collaborative
  filtering): rows are sorted by frequency, most popular first, and cut into ``k`` contiguous blocks that each
  carry the same popularity mass. The sorting permutation is kept, so callers keep their own ids.
* :func:`feature_blocks` (Sec. III, for CTR data): one block per categorical feature; the block's popularity is
  the measured frequency of that feature's values.

Both return a :class:`Blocking`: block offsets into the blocked (sorted) order, per-block popularity ``p_i``
(the average query probability of one of its rows, the input of Alg. 1) and mass.

Example:
    >>> b = equipartition_blocks(torch.tensor([1.0, 8.0, 1.0, 4.0, 2.0]), 2)
    >>> b.rows, b.permutation.tolist()
    ((1, 4), [1, 3, 4, 0, 2])
    >>> b.mass
    (0.5, 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from embreg.embeddings._checks import as_frequencies, check_int
from embreg.errors import EmbregError

__all__ = ["Blocking", "equipartition_blocks", "feature_blocks"]


@dataclass(frozen=True)
class Blocking:
    """A partition of ``N`` rows into ``k`` contiguous blocks of a (possibly permuted) row order.

    Attributes:
        offsets: ``k + 1`` increasing positions; block ``i`` holds positions ``offsets[i]:offsets[i+1]``.
        popularity: ``p_i``, the average query probability of a row of block ``i`` (sums of ``p_i * n_i``
            over blocks give 1).
        mass: fraction of all queries that hit block ``i``.
        permutation: (N,) ``permutation[position] = caller id``; ``None`` when positions are the caller's ids.

    Example:
        >>> b = Blocking(offsets=(0, 2, 5), popularity=(0.3, 0.4 / 3), mass=(0.6, 0.4))
        >>> b.num_blocks, b.num_rows, b.rows
        (2, 5, (2, 3))
    """

    offsets: tuple[int, ...]
    popularity: tuple[float, ...]
    mass: tuple[float, ...]
    permutation: torch.Tensor | None = None

    def __post_init__(self) -> None:
        k = len(self.offsets) - 1
        if k < 1 or self.offsets[0] != 0:
            raise EmbregError(f"offsets={self.offsets} must start at 0 and hold at least 2 entries")
        if any(b <= a for a, b in zip(self.offsets, self.offsets[1:])):
            raise EmbregError(f"offsets={self.offsets} must be strictly increasing (every block non-empty)")
        if len(self.popularity) != k or len(self.mass) != k:
            raise EmbregError(
                f"{k} blocks need {k} popularity and mass values, got {len(self.popularity)} and {len(self.mass)}"
            )
        if self.permutation is not None and self.permutation.shape != (self.num_rows,):
            raise EmbregError(f"permutation has shape {tuple(self.permutation.shape)}; expected ({self.num_rows},)")

    @property
    def num_blocks(self) -> int:
        """k."""
        return len(self.offsets) - 1

    @property
    def num_rows(self) -> int:
        """N, the rows of the whole table."""
        return self.offsets[-1]

    @property
    def rows(self) -> tuple[int, ...]:
        """``n_i``, rows per block."""
        return tuple(b - a for a, b in zip(self.offsets, self.offsets[1:]))

    def index_map(self) -> torch.Tensor | None:
        """(N,) ``position[caller id]``, the inverse of :attr:`permutation` (``None`` for the identity)."""
        if self.permutation is None:
            return None
        inverse = torch.empty_like(self.permutation)
        inverse[self.permutation] = torch.arange(self.num_rows, dtype=self.permutation.dtype)
        return inverse

    def to_positions(self, ids: torch.Tensor) -> torch.Tensor:
        """Caller ids ``(...)`` -> positions in the blocked order ``(...)``."""
        index_map = self.index_map()
        return ids if index_map is None else index_map[ids]

    def to_ids(self, positions: torch.Tensor) -> torch.Tensor:
        """Positions in the blocked order ``(...)`` -> caller ids ``(...)``."""
        return positions if self.permutation is None else self.permutation[positions]

    def block_of(self, ids: torch.Tensor) -> torch.Tensor:
        """The block index ``(...)`` of each caller id ``(...)``."""
        inner = torch.tensor(self.offsets[1:], dtype=torch.int64)
        return torch.searchsorted(inner, self.to_positions(ids).to(torch.int64), right=True)


def _block_stats(sorted_freq: torch.Tensor, offsets: list[int]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    total = float(sorted_freq.sum())
    mass = tuple(float(sorted_freq[a:b].sum()) / total for a, b in zip(offsets, offsets[1:]))
    popularity = tuple(m / (b - a) for m, a, b in zip(mass, offsets, offsets[1:]))
    return popularity, mass


def equipartition_blocks(frequencies: Sequence[float] | torch.Tensor, num_blocks: int) -> Blocking:
    """Sorts rows by frequency and cuts them into ``k`` blocks of equal popularity mass (Appendix, Alg. 3).

    Rows are ordered most frequent first (ties keep the smaller id first). Cut ``j`` is placed at the prefix
    whose cumulative frequency is closest to ``j / k`` of the total, so every block's mass is within one row's
    frequency of ``1 / k`` of the total. Every block keeps at least one row; when a single row carries more than
    ``1 / k`` of all queries, equal masses are impossible and the blocks after it get one row each as needed.

    Args:
        frequencies: (N,) how often each row (caller id) was queried, e.g. training-set counts. Zeros are
            allowed (they sort last); the sum must be positive.
        num_blocks: k, in [1, N].

    Returns:
        A :class:`Blocking` whose ``permutation[position]`` is the caller id at each sorted position.

    Example:
        >>> b = equipartition_blocks([5, 0, 3, 2], 2)
        >>> b.offsets, b.mass, b.to_positions(torch.tensor([0, 1, 2, 3])).tolist()
        ((0, 1, 4), (0.5, 0.5), [0, 3, 1, 2])
    """
    freq = as_frequencies(frequencies)
    n = freq.numel()
    k = check_int(num_blocks, "num_blocks", 1, n)
    order = torch.sort(freq, descending=True, stable=True).indices
    sorted_freq = freq[order]
    prefix = torch.cat([torch.zeros(1, dtype=torch.float64), sorted_freq.cumsum(0)])
    total = float(prefix[-1])
    offsets = [0]
    for j in range(1, k):
        target = total * j / k
        after = int(torch.searchsorted(prefix, torch.tensor([target], dtype=torch.float64)).item())
        after = min(after, n)
        before = max(after - 1, 0)
        cut = before if abs(float(prefix[before]) - target) <= abs(float(prefix[after]) - target) else after
        cut = min(max(cut, offsets[-1] + 1), n - (k - j))
        offsets.append(cut)
    offsets.append(n)
    popularity, mass = _block_stats(sorted_freq, offsets)
    return Blocking(tuple(offsets), popularity, mass, permutation=order)


def feature_blocks(frequencies: Sequence[Sequence[float] | torch.Tensor]) -> Blocking:
    """One block per categorical feature, sized by the feature's measured value frequencies (Sec. III).

    Feature ``i`` with ``n_i`` values becomes block ``i`` (rows ``offsets[i]:offsets[i+1]``, the caller's
    feature-major ids); its popularity is the average query probability of one of its values,
    ``p_i = (queries of feature i) / (n_i * all queries)``. For single-valued features every example queries
    each feature once, so ``p_i`` is proportional to ``1 / n_i`` as in the paper; multi-valued features and
    features with missing values get their real rates.

    Args:
        frequencies: one (n_i,) count vector per feature, e.g. ``bincount`` of the feature in the training data.

    Returns:
        A :class:`Blocking` with the identity permutation.

    Example:
        >>> b = feature_blocks([[3, 1], [1, 1, 1, 1]])
        >>> b.offsets, b.popularity
        ((0, 2, 6), (0.25, 0.125))
    """
    if len(frequencies) == 0:
        raise EmbregError("frequencies is empty; give one count vector per feature")
    vectors = []
    for i, f in enumerate(frequencies):
        tensor = (
            f.detach().to("cpu", torch.float64)
            if isinstance(f, torch.Tensor)
            else torch.as_tensor(f, dtype=torch.float64)
        )
        if tensor.ndim != 1 or tensor.numel() == 0:
            raise EmbregError(f"frequencies[{i}] must be a non-empty 1-d count vector, got shape {tuple(tensor.shape)}")
        vectors.append(tensor)
    flat = as_frequencies(torch.cat(vectors))
    offsets = [0]
    for tensor in vectors:
        offsets.append(offsets[-1] + tensor.numel())
    popularity, mass = _block_stats(flat, offsets)
    return Blocking(tuple(offsets), popularity, mass, permutation=None)

"""Ids an index transform never touches: kept where they occur and never drawn as replacements.

A vocabulary's special ids ([CLS], [SEP], [PAD], [MASK], [UNK] of a WordPiece tokenizer) are not words: swapping a
word for [PAD] or [MASK] would hand the encoder a signal it reads as structure, and swapping a [SEP] away would
remove it. :class:`ExcludedIds` holds such a set for a table of N ids; :func:`sample_se_excluding` is SSE-SE
(sse-stochastic-shared-embeddings.txt, eq. 5) on the other N - |E| ids: each allowed id is kept with probability
1 - p, otherwise replaced by one drawn uniformly among the *other allowed* ids; excluded ids stay as they are.

It works by ranking: the allowed ids are numbered 0..M-1 (M = N - |E|), SSE-SE runs on those ranks over M ids, and
the drawn ranks are mapped back to ids, so the draw is exactly uniform and vectorised (two table look-ups).

Example:
    >>> excluded = ExcludedIds(6, [0, 5])
    >>> g = torch.Generator().manual_seed(0)
    >>> out = sample_se_excluding(torch.tensor([0, 1, 2, 5] * 50), excluded, 1.0, g)
    >>> sorted(set(out.tolist()))  # 0 and 5 kept where they were, 1..4 swapped among 1..4
    [0, 1, 2, 3, 4, 5]
    >>> bool((out.view(50, 4)[:, [0, 3]] == torch.tensor([0, 5])).all())
    True
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from embreg.errors import EmbregError

__all__ = ["ExcludedIds", "sample_se_excluding"]


class ExcludedIds:
    """A set of ids of a table of ``num_embeddings`` that SSE neither swaps nor draws.

    Args:
        num_embeddings: N, the table size.
        ids: the excluded ids, each in [0, N); duplicates are merged. At least two ids must stay allowed.

    Raises:
        EmbregError: an id outside [0, N), or fewer than two allowed ids left.
    """

    def __init__(self, num_embeddings: int, ids: Iterable[int]) -> None:
        chosen = sorted({int(i) for i in ids})
        bad = [i for i in chosen if not 0 <= i < num_embeddings]
        if bad:
            raise EmbregError(f"excluded ids {bad} are outside [0, {num_embeddings})")
        if num_embeddings - len(chosen) < 2:
            raise EmbregError(
                f"excluding {len(chosen)} of {num_embeddings} ids leaves {num_embeddings - len(chosen)}: a swap needs "
                "at least two allowed ids"
            )
        self.num_embeddings = int(num_embeddings)
        self.ids: tuple[int, ...] = tuple(chosen)
        excluded = torch.zeros(num_embeddings, dtype=torch.bool)
        excluded[list(chosen)] = True
        self._excluded = excluded
        self._rank = torch.cumsum(~excluded, 0) - 1  # id -> its rank among the allowed ids
        self._allowed = torch.nonzero(~excluded).flatten()  # rank -> id
        self._on: dict[torch.device, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    @property
    def num_allowed(self) -> int:
        """M = N - |E|, the ids SSE draws among."""
        return int(self._allowed.numel())

    def tables(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(excluded mask (N,), rank of each id (N,), id of each rank (M,))`` on ``device`` (cached)."""
        if device not in self._on:
            self._on[device] = (self._excluded.to(device), self._rank.to(device), self._allowed.to(device))
        return self._on[device]

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"ExcludedIds({self.num_embeddings}, {list(self.ids)})"


def sample_se_excluding(
    ids: torch.Tensor, excluded: ExcludedIds, p: float, generator: torch.Generator | None
) -> torch.Tensor:
    """SSE-SE (eq. 5) among the allowed ids; excluded ids are kept. Unchecked: ``ids`` must lie in [0, N).

    Args:
        ids: integer ids of any shape, e.g. ``(B, T)``.
        excluded: the excluded set of the table.
        p: swap probability of an allowed id.
        generator: the random stream.

    Returns:
        A tensor of the shape and dtype of ``ids``.
    """
    from embreg.sse.functional import _sample_se_dense

    mask, rank, allowed = excluded.tables(ids.device)
    flat = ids.long()
    keep = mask[flat]
    compact = torch.where(keep, 0, rank[flat])
    swapped = _sample_se_dense(compact, excluded.num_allowed, p, generator)
    return torch.where(keep, flat, allowed[swapped]).to(ids.dtype)

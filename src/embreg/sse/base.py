"""The base class of SSE index transforms: ids -> ids, random in training only.

It owns what every transform shares: the swap probability p, input checks, the
eval-mode / p = 0 identity, and a private ``torch.Generator`` whose state is part
of ``state_dict()`` so that a resumed run continues the exact random stream.
"""

from __future__ import annotations

import abc
import numbers
import warnings
import zlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.sse._kernel import fused_kernel, with_range_error
from embreg.sse._validation import (
    check_ids_dtype,
    check_ids_range,
    check_num_embeddings,
    check_probability,
)

_SEED_UPPER = 2**62  # torch seeds are 64-bit; staying below 2**63 leaves room for a rank offset


class IndexTransform(nn.Module, abc.ABC):
    """Base of SSE transforms: maps a tensor of ids to a tensor of ids of the same shape.

    ``forward(ids)`` checks the ids, returns ``ids`` itself (the same tensor) when
    the module is in eval mode or ``p == 0``, and otherwise returns ``self.sample(ids)``.
    Subclasses implement :meth:`sample`.

    Randomness comes from a private ``torch.Generator`` created on the ids' device
    at the first draw and seeded with ``seed + rank_offset``. Its state is saved by
    ``state_dict()`` (via ``get_extra_state``) and restored by ``load_state_dict``.

    Args:
        num_embeddings: N, the number of ids (>= 2).
        p: swap probability p0 in [0, 1] (sse-stochastic-shared-embeddings.txt, eq. 3 and 5).
        seed: generator seed; None draws one from torch's global RNG now, so that a
            preceding ``torch.manual_seed`` makes the run reproducible.
        rank_offset: added to the seed, e.g. the process rank under DDP so that ranks
            draw different swaps.

    Example:
        >>> class NextId(IndexTransform):
        ...     def sample(self, ids: torch.Tensor) -> torch.Tensor:
        ...         return (ids + 1) % self.num_embeddings
        >>> shift = NextId(10, p=0.5, seed=0)
        >>> shift(torch.tensor([9])).tolist(), shift.eval()(torch.tensor([9])).tolist()
        ([0], [9])
    """

    def __init__(self, num_embeddings: int, p: float, seed: int | None = None, rank_offset: int = 0) -> None:
        super().__init__()
        self.num_embeddings = check_num_embeddings(num_embeddings)
        self.p = p
        if isinstance(rank_offset, bool) or not isinstance(rank_offset, numbers.Integral) or rank_offset < 0:
            raise EmbregError(f"rank_offset={rank_offset!r} must be an int >= 0")
        self.rank_offset: int = int(rank_offset)
        self.seed: int = _draw_seed() if seed is None else _check_seed(seed)
        self._generator: torch.Generator | None = None
        self._pending_state: dict[str, Any] | None = None
        self.passthrough: bool = False
        """When True, ``forward`` hands every ids tensor back untouched and unchecked: the ids were already drawn
        by this module where the batch was built (:mod:`embreg.train.host_draws`)."""

    # ------------------------------------------------------------------ public API
    @property
    def p(self) -> float:
        """Swap probability in [0, 1]; may be changed between steps (e.g. a schedule)."""
        return self._p

    @p.setter
    def p(self, value: float) -> None:
        self._p = check_probability(value)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Return ids with random swaps in training mode, ``ids`` unchanged otherwise.

        Args:
            ids: integer tensor of any shape, e.g. (B,) or (B, L).

        Returns:
            Tensor of the same shape, dtype and device.
        """
        if self.passthrough:
            return ids
        if self.training and self._p != 0.0 and isinstance(ids, torch.Tensor) and ids.device.type == "cpu":
            fused = self._fused_sample(ids)
            if fused is not None:
                return fused
        self.check_ids(ids)
        if not self.training or self._p == 0.0 or ids.numel() == 0:
            return ids
        return self.sample(ids)

    def _fused_sample(self, ids: torch.Tensor) -> torch.Tensor | None:
        """Checked sampling of CPU ids in one call of the fused kernel, or None to take the generic path.

        Subclasses with a kernel override this; the kernel validates every id itself, so the separate range
        check of the generic path is skipped (and redone only to word the error when the kernel rejects an id).
        """
        return None

    def _run_kernel(
        self, ids: torch.Tensor, call: Callable[[Any, torch.Generator], torch.Tensor]
    ) -> torch.Tensor | None:
        """``call(kernel, generator)`` for non-empty integer CPU ids when the fused kernel is available, else None."""
        if ids.numel() == 0:
            return None
        check_ids_dtype(ids, self.num_embeddings)
        kernel = fused_kernel()
        if kernel is None:
            return None
        generator = self.generator(ids.device)
        return with_range_error(ids, self.num_embeddings, lambda: call(kernel, generator))

    def check_ids(self, ids: torch.Tensor) -> None:
        """Raise :class:`EmbregError` unless ``ids`` is an integer tensor with values in [0, N), of a dtype that
        holds N - 1 (the largest id a swap can write)."""
        check_ids_dtype(ids, self.num_embeddings)
        check_ids_range(ids, self.num_embeddings)

    @abc.abstractmethod
    def sample(self, ids: torch.Tensor) -> torch.Tensor:
        """Draw the swapped ids (called in training mode with p > 0 on checked ids).

        Args:
            ids: integer tensor of any shape, values valid for this transform.

        Returns:
            Tensor of the same shape, dtype and device.
        """

    def manual_seed(self, seed: int) -> IndexTransform:
        """Restart the random stream from ``seed + rank_offset``; returns self."""
        self.seed = _check_seed(seed)
        self._generator = None
        self._pending_state = None
        return self

    def generator(self, device: torch.device | str) -> torch.Generator:
        """The transform's generator on ``device``, created (or moved) on first use.

        Moving to another device cannot carry the generator state over (CPU and
        CUDA generators differ), so the new generator is seeded with a number drawn
        from the old one: the stream stays deterministic and does not restart.
        """
        device = torch.device(device)
        current = self._generator
        if current is not None and same_device(current.device, device):
            return current
        fresh = torch.Generator(device=device)
        if current is not None:
            fresh.manual_seed(int(torch.randint(0, _SEED_UPPER, (1,), generator=current, device=current.device)))
        else:
            fresh.manual_seed(self.seed + self.rank_offset)
            self._apply_pending_state(fresh)
        self._generator = fresh
        return fresh

    # ----------------------------------------------------------- checkpoint state
    def get_extra_state(self) -> dict[str, Any]:
        """Seed and generator state, stored by ``state_dict()`` under ``<prefix>_extra_state``."""
        if self._generator is not None:
            return {
                "seed": self.seed,
                "rank_offset": self.rank_offset,
                "generator_device": self._generator.device.type,
                "generator_state": self._generator.get_state(),
            }
        if self._pending_state is not None:
            return dict(self._pending_state)
        return {"seed": self.seed, "rank_offset": self.rank_offset, "generator_device": None, "generator_state": None}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_extra_state` saved; the generator resumes the same stream.

        The module keeps its own ``rank_offset``. A state saved under another rank
        offset (e.g. every DDP rank loading rank 0's checkpoint) is not copied as is,
        which would give all ranks the same swaps: the generator continues from a
        seed drawn from the saved state plus this module's offset instead.
        """
        if not isinstance(state, dict) or "seed" not in state:
            raise EmbregError(f"{type(self).__name__}: malformed extra state {state!r}")
        self.seed = _check_seed(state["seed"])
        self._generator = None
        self._pending_state = dict(state) if state.get("generator_state") is not None else None

    def _apply_pending_state(self, generator: torch.Generator) -> None:
        pending, self._pending_state = self._pending_state, None
        if pending is None:
            return
        if pending["generator_device"] != generator.device.type:
            warnings.warn(
                f"{type(self).__name__}: the saved generator state is for a {pending['generator_device']} "
                f"generator, the ids are on {generator.device.type}; restarting from seed {self.seed}",
                stacklevel=3,
            )
            return
        generator.set_state(pending["generator_state"])
        if pending.get("rank_offset", self.rank_offset) != self.rank_offset:
            drawn = int(torch.randint(0, _SEED_UPPER, (1,), generator=generator, device=generator.device))
            generator.manual_seed((drawn + self.rank_offset) % _SEED_UPPER)

    def extra_repr(self) -> str:
        return f"num_embeddings={self.num_embeddings}, p={self._p}, seed={self.seed}, rank_offset={self.rank_offset}"


def _draw_seed() -> int:
    return int(torch.randint(0, _SEED_UPPER, (1,)))


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < _SEED_UPPER:
        raise EmbregError(f"seed={seed!r} must be an int in [0, 2**62)")
    return int(seed)


def same_device(a: torch.device, b: torch.device) -> bool:
    """Devices are the same, treating a missing CUDA index as the current device."""
    if a.type != b.type:
        return False
    if a.type == "cuda":
        current = torch.cuda.current_device()
        return (a.index if a.index is not None else current) == (b.index if b.index is not None else current)
    return True


KIND_SEED_OFFSETS = {"user": 0, "item": 1, "token": 2, "label": 3}
"""Added to a recipe transform's seed per id kind, so the transforms of one run draw independent streams."""


def context_excluded_ids(context: Any) -> tuple[int, ...]:
    """The ids of ``context.kind`` that the task says index transforms must leave alone (``()``: none).

    Example:
        >>> from types import SimpleNamespace
        >>> context_excluded_ids(SimpleNamespace(kind="token"))
        ()
    """
    excluded = getattr(context, "excluded_ids", None)
    return tuple(int(i) for i in excluded()) if callable(excluded) else ()


def recipe_seed(context: Any, seed_offset: int) -> int:
    """The seed of the index transform a recipe builds for ``context.kind``: training seed + offset + kind's.

    A kind with a name, ``<kind>:<name>`` (one field of a click table, ``field:age``), adds a number fixed by its
    name (CRC-32), so the transforms of a table's fields draw independent streams.

    Example:
        >>> from types import SimpleNamespace
        >>> [recipe_seed(SimpleNamespace(seed=0, kind=k), 0) for k in ("user", "item")]
        [0, 1]
        >>> recipe_seed(SimpleNamespace(seed=0, kind="field:a"), 0) != recipe_seed(SimpleNamespace(seed=0, kind="field:b"), 0)
        True
    """
    kind = context.kind
    offset = KIND_SEED_OFFSETS.get(kind, len(KIND_SEED_OFFSETS))
    if isinstance(kind, str) and ":" in kind:
        offset += 1 + zlib.crc32(kind.encode("utf-8"))
    return int(context.seed) + seed_offset + offset

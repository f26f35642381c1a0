"""SSE-SE as a module: swap ids for uniformly drawn other ids during training."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from embreg.registry import register
from embreg.sse._validation import check_probability
from embreg.sse.base import IndexTransform, context_excluded_ids, recipe_seed
from embreg.sse.exclusion import ExcludedIds, sample_se_excluding
from embreg.sse.functional import _sample_se


class SSE(IndexTransform):
    """Stochastic Shared Embeddings, simple form (SSE-SE).

    In training mode each id is kept with probability 1 - p and otherwise replaced
    by an id drawn uniformly among the other N - 1 ids
    (sse-stochastic-shared-embeddings.txt, Section 3.2, eq. 5). The paper finds
    p = 0.01 a good default. In eval mode, or with p = 0, ids pass through unchanged.

    With ``exclude`` (e.g. a tokenizer's special ids) those ids are neither swapped
    nor drawn: SSE-SE then acts on the other N - |exclude| ids
    (:mod:`embreg.sse.exclusion`).

    Args:
        num_embeddings: N, the size of the embedding table (>= 2).
        p: swap probability p0 in [0, 1].
        seed: generator seed; None draws one from torch's global RNG.
        rank_offset: added to the seed (e.g. the DDP rank).
        exclude: ids kept where they occur and never drawn as replacements.

    Shapes:
        ids: any shape, e.g. (B,) or (B, L); the output has the same shape and dtype.

    Example:
        >>> sse = SSE(1000, p=0.01, seed=0)
        >>> ids = torch.randint(0, 1000, (32, 50))
        >>> sse(ids).shape
        torch.Size([32, 50])
        >>> sse.eval()(ids) is ids
        True
    """

    def __init__(
        self,
        num_embeddings: int,
        p: float,
        seed: int | None = None,
        rank_offset: int = 0,
        exclude: Iterable[int] = (),
    ) -> None:
        super().__init__(num_embeddings, p, seed=seed, rank_offset=rank_offset)
        exclude = tuple(exclude)
        self.excluded: ExcludedIds | None = ExcludedIds(self.num_embeddings, exclude) if exclude else None

    def _fused_sample(self, ids: torch.Tensor) -> torch.Tensor | None:
        if self.excluded is not None:  # the fused kernel draws among every id
            return None
        return self._run_kernel(ids, lambda kernel, gen: kernel.sse_se(ids, self.num_embeddings, self._p, gen))

    def sample(self, ids: torch.Tensor) -> torch.Tensor:
        """Swap each id with probability p for a uniform other id (eq. 5)."""
        if self.excluded is not None:
            return sample_se_excluding(ids, self.excluded, self.p, self.generator(ids.device))
        return _sample_se(ids, self.num_embeddings, self.p, self.generator(ids.device))


@dataclass
class SSEConfig:
    """``index_transforms: {item: {name: sse-se, p: 0.01}}``.

    Attributes:
        p: swap probability (the paper's ``p_u``/``p_i``, Table 1; ``p_x``/``p_y`` for input/output tokens).
        seed_offset: added to the training seed (and a per-kind offset) to seed the transform's generator.
    """

    p: float = 0.01
    seed_offset: int = 1000

    def __post_init__(self) -> None:
        check_probability(self.p)


@register(
    "index_transform",
    "sse-se",
    config=SSEConfig,
    summary="SSE-SE: swap an id for a uniformly drawn other id with probability p",
    reference="sse-stochastic-shared-embeddings.txt, eq. 5 (Alg. 1)",
)
def build_sse(config: SSEConfig, context: Any) -> SSE:
    """:class:`SSE` over every id of ``context.kind``, leaving out the ids the task excludes (a tokenizer's
    special ids)."""
    return SSE(
        context.num_ids(),
        config.p,
        seed=recipe_seed(context, config.seed_offset),
        exclude=context_excluded_ids(context),
    )

"""Label-side SSE: swap target ids (class labels, next-item targets) during training."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from embreg.errors import EmbregError
from embreg.registry import register
from embreg.sse._cuda_sampler import sse_se_cuda
from embreg.sse._validation import check_ids_dtype, check_ids_range, check_probability, holds_value
from embreg.sse.base import IndexTransform, context_excluded_ids, recipe_seed
from embreg.sse.exclusion import ExcludedIds, sample_se_excluding
from embreg.sse.functional import _cuda_kernel, _sample_se


class LabelSSE(IndexTransform):
    """SSE-SE applied to labels: each target id is swapped for a uniform other class with probability p.

    The paper applies SSE to the embeddings of the label y_i as well as the input
    (sse-stochastic-shared-embeddings.txt, Section 3.2 and Algorithm 1, with the
    transition law of eq. 5), and notes (Section 2) that SSE-SE on one-hot labels is
    closely related to label smoothing: in expectation the target becomes
    ``(1 - p) * onehot(y) + p / (N - 1)`` on every other class, label smoothing's
    mixture without mass on the true class. Give it its own p, separate from the
    input-side transform's.

    Positions equal to ``ignore_index`` (padding) are left untouched. When
    ``ignore_index`` is itself a class id in [0, num_classes) (e.g. item 0 used as
    padding), it is also never drawn as a replacement, so a real target never turns
    into padding: swaps are then uniform among the other N - 2 classes.

    ``exclude`` generalises this: ids in it (e.g. a vocabulary's special ids when
    the targets are word pieces) are never swapped and never drawn, so swaps are
    uniform among the other allowed classes (:mod:`embreg.sse.exclusion`).

    Args:
        num_classes: N, the number of classes or target items (>= 2; >= 3 when
            ``ignore_index`` is a class id).
        p: swap probability p0 in [0, 1].
        ignore_index: label value marking positions to leave alone.
        seed: generator seed; None draws one from torch's global RNG.
        rank_offset: added to the seed (e.g. the DDP rank).
        exclude: class ids kept where they occur and never drawn as replacements.

    Shapes:
        targets: any shape, e.g. (B,) or (B, L); the output has the same shape and dtype.

    Example:
        >>> label_sse = LabelSSE(num_classes=10, p=0.1, seed=0)
        >>> targets = torch.tensor([[3, 7, -100], [1, -100, -100]])
        >>> out = label_sse(targets)
        >>> bool((out[targets == -100] == -100).all())
        True
    """

    def __init__(
        self,
        num_classes: int,
        p: float,
        ignore_index: int = -100,
        seed: int | None = None,
        rank_offset: int = 0,
        exclude: Iterable[int] = (),
    ) -> None:
        super().__init__(num_classes, p, seed=seed, rank_offset=rank_offset)
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):
            raise EmbregError(f"ignore_index={ignore_index!r} must be an int")
        ignore_index = int(ignore_index)
        if 0 <= ignore_index < num_classes and num_classes < 3:
            raise EmbregError(
                f"num_classes={num_classes} must be >= 3 when ignore_index={ignore_index} is a class id: "
                "a swap needs another non-padding class"
            )
        self.ignore_index: int = ignore_index
        exclude = tuple(exclude)
        if exclude and 0 <= ignore_index < num_classes:
            exclude = (*exclude, ignore_index)  # padding that is a class id is excluded like the rest
        self.excluded: ExcludedIds | None = ExcludedIds(self.num_embeddings, exclude) if exclude else None

    @property
    def num_classes(self) -> int:
        """N, the number of classes."""
        return self.num_embeddings

    def check_ids(self, ids: torch.Tensor) -> None:
        """Raise unless ``ids`` is an integer tensor, of a dtype that holds N - 1, with values in [0, N) or equal
        to ignore_index."""
        check_ids_dtype(ids, self.num_embeddings)
        check_ids_range(ids, self.num_embeddings, allowed=self.ignore_index)

    def sample(self, ids: torch.Tensor) -> torch.Tensor:
        """Swap each non-ignored target with probability p (eq. 5), keeping ignore_index positions."""
        generator = self.generator(ids.device)
        padding = self.ignore_index
        if self.excluded is not None:
            keep = ids == padding if holds_value(ids.dtype, padding) else torch.zeros_like(ids, dtype=torch.bool)
            swapped = sample_se_excluding(
                torch.where(keep, self.excluded.ids[0], ids), self.excluded, self.p, generator
            )
            return torch.where(keep, ids, swapped)
        cuda = _cuda_kernel(ids)
        if cuda is not None:  # one launch: the keep mask and the excluded padding class are in the kernel
            excluded = padding if 0 <= padding < self.num_embeddings else None
            return sse_se_cuda(cuda, ids, self.num_embeddings, self.p, generator, keep_value=padding, excluded=excluded)
        # no id equals an ignore_index the dtype cannot hold (uint8 ids and -100); comparing would wrap it
        keep = ids == padding if holds_value(ids.dtype, padding) else torch.zeros_like(ids, dtype=torch.bool)
        if 0 <= padding < self.num_embeddings:
            # drop the padding class from the index set, swap in the compact set of N - 1 classes, map back
            compact = torch.where(keep, 0, ids - (ids > padding).to(ids.dtype))
            swapped = _sample_se(compact, self.num_embeddings - 1, self.p, generator)
            swapped = swapped + (swapped >= padding).to(ids.dtype)
        else:
            swapped = _sample_se(torch.where(keep, 0, ids), self.num_embeddings, self.p, generator)
        return torch.where(keep, ids, swapped)

    def extra_repr(self) -> str:
        return (
            f"num_classes={self.num_embeddings}, p={self.p}, ignore_index={self.ignore_index}, "
            f"seed={self.seed}, rank_offset={self.rank_offset}"
            + (f", exclude={list(self.excluded.ids)}" if self.excluded is not None else "")
        )


@dataclass
class LabelSSEConfig:
    """``index_transforms: {label: {name: label-sse, p: 0.01}}``: SSE-SE on target ids (the paper's ``p_y``).

    Attributes:
        p: swap probability of a target id.
        ignore_index: target value left alone (padding).
        seed_offset: added to the training seed (and a per-kind offset) to seed the transform's generator.
    """

    p: float = 0.01
    ignore_index: int = -100
    seed_offset: int = 1000

    def __post_init__(self) -> None:
        check_probability(self.p)


@register(
    "index_transform",
    "label-sse",
    config=LabelSSEConfig,
    kinds=("label",),
    summary="SSE-SE on label/target ids (output embeddings)",
    reference="sse-stochastic-shared-embeddings.txt, Sec. 3 and Table 4 (p_y)",
)
def build_label_sse(config: LabelSSEConfig, context: Any) -> LabelSSE:
    """:class:`LabelSSE` over every class of ``context.kind``, leaving out the ids the task excludes (a
    tokenizer's special ids, when the targets are word pieces)."""
    return LabelSSE(
        context.num_ids(),
        config.p,
        ignore_index=config.ignore_index,
        seed=recipe_seed(context, config.seed_offset),
        exclude=context_excluded_ids(context),
    )

"""Next-item evaluation on a leave-one-out split: full ranking over all items and ranking against sampled negatives.

The protocol is SASRec's (Kang & McAuley 2018, "Self-Attentive Sequential Recommendation", Sec. IV), as
sse-stochastic-shared-embeddings.txt Sec. 4.2 uses it: each user's held-out next item is ranked against 100 sampled
items the user never interacted with (NDCG@10, Hit@10). Sampled metrics are biased estimates of the full-ranking
ones and can even order models differently (Krichene & Rendle 2020, "On Sampled Metrics for Item Recommendation"),
so the evaluator also ranks the target against every item outside the user's history.

Ties are pessimistic: the rank of the target is the number of candidates scoring strictly higher plus the number of
other candidates scoring the same, so a model that scores everything equally ranks last, not first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
from torch import nn

from embreg.data.sequences import SequenceSplit, left_pad
from embreg.errors import ConfigError, EmbregError
from embreg.metrics.recommendation import topk_excluding

if TYPE_CHECKING:
    from embreg.models.protocols import NextItemModel

__all__ = ["NEGATIVE_PREFIXES", "NextItemEvaluator", "target_ranks"]

#: metric name prefix of each kind of sampled negatives
NEGATIVE_PREFIXES = {"uniform": "sampled_", "popularity": "pop_sampled_"}
_SPLITS = ("valid", "test")


def target_ranks(scores: torch.Tensor, targets: torch.Tensor, exclude_mask: torch.Tensor | None = None) -> torch.Tensor:
    """0-based rank of each row's target among that row's candidates, ties counted against the target.

    ``rank = #{candidates scoring > target} + #{other candidates scoring == target}``. Candidates are the columns
    not in ``exclude_mask`` (all columns when it is None); the target itself is always a candidate. NaN scores count
    as ``-inf`` (a NaN target ranks last).

    Args:
        scores: (B, N) scores.
        targets: (B,) integer column of each row's target.
        exclude_mask: (B, N) bool, True for columns that are not candidates (e.g. the user's history), or None.

    Returns:
        (B,) int64 ranks in ``[0, candidates - 1]``.

    Example:
        >>> scores = torch.tensor([[0.9, 0.5, 0.5, 0.1], [0.9, 0.5, 0.5, 0.1]])
        >>> target_ranks(scores, torch.tensor([1, 1]), torch.tensor([[True, False, False, False]] * 2)).tolist()
        [1, 1]
        >>> target_ranks(scores, torch.tensor([3, 0])).tolist()
        [3, 0]
    """
    if scores.ndim != 2 or targets.shape != scores.shape[:1]:
        raise EmbregError(
            f"scores must be (B, N) and targets (B,), got {tuple(scores.shape)} and {tuple(targets.shape)}"
        )
    if exclude_mask is not None and (exclude_mask.shape != scores.shape or exclude_mask.dtype != torch.bool):
        raise EmbregError(
            f"exclude_mask must be a bool tensor of the scores' shape {tuple(scores.shape)}, "
            f"got {exclude_mask.dtype} {tuple(exclude_mask.shape)}"
        )
    scores = scores.detach()
    scores = torch.where(torch.isnan(scores), torch.full_like(scores, -float("inf")), scores)
    target = targets.long().to(scores.device)[:, None]
    own = scores.gather(1, target)
    beaten = scores >= own  # higher or equal, including the target itself
    if exclude_mask is not None:
        candidate = ~exclude_mask.to(scores.device)
        candidate.scatter_(1, target, True)
        beaten &= candidate
    return beaten.sum(dim=1) - 1


class NextItemEvaluator:
    """Next-item metrics of a sequential model on the ``"valid"`` or ``"test"`` targets of a leave-one-out split.

    For split ``s`` each user's input is ``left_pad(split.history(s), max_len, PAD)`` with ``PAD = num_items``, and
    the model's ``score_next(batch) -> (B, num_items)`` scores every item as the next one. Metrics (averaged over
    users, unprefixed; the trainer adds ``val_``/``test_``):

    - full ranking, the target against every item not in the user's history (the target itself always stays):
      ``ndcg@k``, ``hit@k`` for each k, and ``mrr``;
    - for each kind of sampled negatives, the target against that user's negatives: ``sampled_ndcg@k``,
      ``sampled_hit@k`` (``"uniform"``) and ``pop_sampled_ndcg@k``, ``pop_sampled_hit@k`` (``"popularity"``);
    - with ``item_counts``, the beyond-accuracy metrics of the full-ranking top-k lists (history excluded):
      ``coverage@k``, ``avg_popularity@k``, ``gini@k``, ``tail_percentage@k`` (:mod:`embreg.metrics.beyond_accuracy`).

    With rank ``r`` (0-based, pessimistic ties, see :func:`target_ranks`): ``ndcg@k = 1/log2(r + 2)`` if ``r < k``
    else 0, ``hit@k = [r < k]``, ``mrr = 1/(r + 1)``. Scoring runs in eval mode under ``no_grad`` in user batches,
    on the device of the model's parameters; the model's train/eval mode is restored afterwards.

    Args:
        split: the leave-one-out split.
        max_len: input length L (the model's ``max_len``).
        negatives: ``{"uniform": (U, n), "popularity": (U, n)}`` item ids per user row (from
            :func:`embreg.data.sequences.sampled_negatives`; SASRec uses n = 100), either kind optional, or None.
        ks: cut-offs.
        batch_size: users scored at once (memory ``batch_size * num_items`` scores).
        item_counts: ``(num_items,)`` training occurrences of each item, for the beyond-accuracy metrics (``None``:
            none are reported).

    Example:
        >>> from embreg.data.sequences import SequenceSplit
        >>> split = SequenceSplit(np.array([0]), [np.array([0])], np.array([1]), np.array([2]), 1, 4, 0, 3)
        >>> class Fixed(nn.Module):
        ...     def score_next(self, batch):
        ...         return torch.tensor([[0.0, 1.0, 3.0, 2.0]]).expand(len(batch["user"]), -1)
        >>> NextItemEvaluator(split, max_len=2)(Fixed(), "valid")  # target 1 among items 1, 2, 3: rank 2
        {'ndcg@10': 0.5, 'hit@10': 1.0, 'mrr': 0.3333333333333333}
    """

    def __init__(
        self,
        split: SequenceSplit,
        max_len: int,
        *,
        negatives: dict[str, torch.Tensor] | None = None,
        ks: Sequence[int] = (10,),
        batch_size: int = 1024,
        item_counts: np.ndarray | None = None,
    ) -> None:
        ks = tuple(ks)
        if not ks or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 for k in ks):
            raise ConfigError(f"ks={ks} must be a non-empty sequence of positive integers")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ConfigError(f"batch_size={batch_size!r} must be a positive integer")
        if len(split) == 0:
            raise EmbregError("the split keeps no users; lower min_interactions or use more data")
        self.split = split
        self.max_len = int(max_len)
        self.ks = tuple(int(k) for k in ks)
        self.batch_size = int(batch_size)
        self.item_counts = None if item_counts is None else np.asarray(item_counts)
        self.num_items = split.num_items
        self.users = torch.from_numpy(np.asarray(split.users, dtype=np.int64))
        self.negatives = self._check_negatives(negatives or {})
        self._inputs: dict[str, torch.Tensor] = {}
        self._targets: dict[str, torch.Tensor] = {}
        self._history: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for name in _SPLITS:
            history = split.history(name)
            self._inputs[name] = left_pad(history, self.max_len, self.num_items)
            self._targets[name] = torch.from_numpy(np.asarray(split.targets(name), dtype=np.int64))
            lengths = np.array([len(h) for h in history], dtype=np.int64)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            items = np.concatenate(history).astype(np.int64) if history else np.zeros(0, np.int64)
            self._history[name] = (torch.from_numpy(items), torch.from_numpy(offsets))
            for kind, negs in self.negatives.items():
                if bool((negs == self._targets[name][:, None]).any()):
                    raise EmbregError(
                        f"{kind} negatives contain a user's {name} target; draw them with sampled_negatives, which "
                        "excludes every item the user interacted with"
                    )

    @property
    def split_names(self) -> list[str]:
        return list(_SPLITS)

    def _check_negatives(self, negatives: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        unknown = sorted(set(negatives) - set(NEGATIVE_PREFIXES))
        if unknown:
            raise ConfigError(f"unknown negatives kind(s) {unknown}; known: {sorted(NEGATIVE_PREFIXES)}")
        checked = {}
        for kind, negs in negatives.items():
            negs = torch.as_tensor(negs)
            if negs.ndim != 2 or negs.shape[0] != len(self.split) or negs.shape[1] < 1:
                raise EmbregError(
                    f"{kind} negatives have shape {tuple(negs.shape)}; expected ({len(self.split)}, n), "
                    "one row per kept user"
                )
            if negs.dtype not in (torch.int64, torch.int32) or int(negs.min()) < 0 or int(negs.max()) >= self.num_items:
                raise EmbregError(f"{kind} negatives must be integer item ids in [0, {self.num_items})")
            checked[kind] = negs.long()
        return checked

    def _batch_mask(self, name: str, start: int, stop: int, device: torch.device) -> torch.Tensor:
        """(stop - start, num_items) bool: True for the history items of users ``start..stop-1``."""
        items, offsets = self._history[name]
        counts = offsets[start + 1 : stop + 1] - offsets[start:stop]
        rows = torch.repeat_interleave(torch.arange(stop - start), counts)
        mask = torch.zeros(stop - start, self.num_items, dtype=torch.bool, device=device)
        mask[rows.to(device), items[offsets[start] : offsets[stop]].to(device)] = True
        return mask

    @torch.no_grad()
    def ranks(self, model: nn.Module, split: str, *, top_k: int | None = None) -> dict[str, torch.Tensor]:
        """(U,) int64 ranks of each user's target: ``"full"`` and one per kind of negatives; with ``top_k``, also
        ``"topk"``: (U, top_k) the best items outside each user's history, best first (ties: lower id first).

        Runs the model in eval mode under ``no_grad`` and restores its mode afterwards.
        """
        if split not in _SPLITS:
            raise KeyError(f"unknown split {split!r}; this evaluator has {self.split_names}")
        parameter = next(iter(model.parameters()), None)
        device = parameter.device if parameter is not None else torch.device("cpu")
        inputs, targets = self._inputs[split], self._targets[split]
        parts: dict[str, list[torch.Tensor]] = {"full": [], **{kind: [] for kind in self.negatives}}
        if top_k is not None:
            parts["topk"] = []
        was_training = model.training
        model.eval()
        try:
            for start in range(0, len(self.split), self.batch_size):
                stop = min(start + self.batch_size, len(self.split))
                batch = {"user": self.users[start:stop].to(device), "input": inputs[start:stop].to(device)}
                scores = cast("NextItemModel", model).score_next(batch)
                if tuple(scores.shape) != (stop - start, self.num_items):
                    raise EmbregError(
                        f"score_next returned shape {tuple(scores.shape)}; expected ({stop - start}, "
                        f"{self.num_items}): one score per real item (no padding column)"
                    )
                target = targets[start:stop].to(scores.device)
                mask = self._batch_mask(split, start, stop, scores.device)
                parts["full"].append(target_ranks(scores, target, mask).cpu())
                if top_k is not None:
                    rows, cols = mask.nonzero(as_tuple=True)
                    parts["topk"].append(topk_excluding(scores.float(), rows, cols, top_k).cpu())
                for kind, negs in self.negatives.items():
                    candidates = torch.cat([target[:, None], negs[start:stop].to(scores.device)], dim=1)
                    sampled = scores.gather(1, candidates)
                    parts[kind].append(target_ranks(sampled, torch.zeros_like(target)).cpu())
        finally:
            model.train(was_training)
        return {kind: torch.cat(values) for kind, values in parts.items()}

    def __call__(self, model: nn.Module, split: str) -> dict[str, float]:
        counts = self.item_counts
        ranks = self.ranks(model, split, top_k=None if counts is None else max(self.ks))
        metrics = self._metrics(ranks["full"], "")
        metrics["mrr"] = (1.0 / (ranks["full"].double() + 1.0)).mean().item()
        for kind in self.negatives:
            metrics.update(self._metrics(ranks[kind], NEGATIVE_PREFIXES[kind]))
        if counts is not None:
            from embreg.metrics.beyond_accuracy import beyond_accuracy_metrics

            metrics.update(beyond_accuracy_metrics(ranks["topk"], counts, ks=self.ks))
        return metrics

    def _metrics(self, ranks: torch.Tensor, prefix: str) -> dict[str, float]:
        ranks = ranks.double()
        out = {}
        for k in self.ks:
            hit = ranks < k
            out[f"{prefix}ndcg@{k}"] = torch.where(hit, 1.0 / torch.log2(ranks + 2.0), 0.0).mean().item()
            out[f"{prefix}hit@{k}"] = hit.double().mean().item()
        return out

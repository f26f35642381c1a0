"""Linear-chain CRF, functional core: path scores, the forward algorithm, Viterbi decoding.

Reference: nlp-best-practices.txt, "Sequence labelling" ("CRF output layer", "Constrained decoding"; Lafferty et
al. 2001, Huang et al. 2015, Lample et al. 2016). For emissions ``e_t(y)`` of a sequence of length ``L``, start,
transition and end scores ``s(y)``, ``A[y, y']``, ``f(y)``, a tag path ``y_1..y_L`` scores

    score(y) = s(y_1) + e_1(y_1) + sum_{t=2..L} (A[y_{t-1}, y_t] + e_t(y_t)) + f(y_L)

and ``log p(y | x) = score(y) - log Z`` with ``log Z = logsumexp over all paths of score``, computed by the forward
algorithm in log space, ``alpha_t(j) = e_t(j) + logsumexp_i(alpha_{t-1}(i) + A[i, j])``. Viterbi replaces the
logsumexp by a max and keeps the argmax as back-pointers.

Every function works on a batch at once (one loop over time, none over the batch) on any device. ``mask`` is
``(B, T)`` bool with each row's ones first (right padding) and ``mask[:, 0]`` all true; padded steps leave the
recursions unchanged, so a row of length ``L`` ends its path at ``t = L``. Scores of ``-inf`` (a disallowed
transition, :func:`constrain`) are exact: such a path has probability 0 and is never decoded.
"""

from __future__ import annotations

import torch

from embreg.errors import EmbregError

__all__ = ["constrain", "crf_log_likelihood", "crf_log_partition", "crf_path_score", "viterbi_decode"]


def constrain(scores: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """``scores`` with every entry that ``allowed`` (same shape, bool) marks false set to ``-inf``.

    Example:
        >>> constrain(torch.zeros(2), torch.tensor([True, False])).tolist()
        [0.0, -inf]
    """
    if allowed is None:
        return scores
    return scores.masked_fill(~allowed, float("-inf"))


def _checked_mask(emissions: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if emissions.dim() != 3:
        raise EmbregError(f"emissions must be (B, T, K), got shape {tuple(emissions.shape)}")
    b, t, _ = emissions.shape
    if t == 0:
        raise EmbregError("emissions have no time steps (T = 0); every sequence needs at least one token")
    if mask is None:
        return torch.ones(b, t, dtype=torch.bool, device=emissions.device)
    if mask.shape != (b, t):
        raise EmbregError(f"mask must be (B, T) = {(b, t)}, got {tuple(mask.shape)}")
    mask = mask.bool()
    ok = mask[:, 0].all() & (mask[:, 1:] <= mask[:, :-1]).all()  # one device sync for both checks
    if not bool(ok):
        raise EmbregError(
            "mask must switch on the first step of every sequence and hold each row's ones first (right padding)"
        )
    return mask


def crf_path_score(
    emissions: torch.Tensor,
    tags: torch.Tensor,
    mask: torch.Tensor | None,
    transitions: torch.Tensor,
    start: torch.Tensor,
    end: torch.Tensor,
) -> torch.Tensor:
    """``score(y)`` of the given tag paths (module docstring), vectorised over batch and time.

    Args:
        emissions: ``(B, T, K)``; tags: ``(B, T)`` int64 (padded steps may hold any tag id);
        mask: ``(B, T)`` bool or ``None`` (all on); transitions: ``(K, K)``; start, end: ``(K,)``.

    Returns:
        ``(B,)`` scores (``-inf`` for a path through a disallowed score).

    Example:
        >>> e = torch.zeros(1, 2, 2); A = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
        >>> crf_path_score(e, torch.tensor([[0, 1]]), None, A, torch.zeros(2), torch.zeros(2)).tolist()
        [1.0]
    """
    mask = _checked_mask(emissions, mask)
    tags = tags.long()
    emitted = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)  # (B, T)
    zero = emitted.new_zeros(())
    total = torch.where(mask, emitted, zero).sum(dim=1) + start[tags[:, 0]]
    if tags.shape[1] > 1:
        moved = transitions[tags[:, :-1], tags[:, 1:]]  # (B, T - 1)
        total = total + torch.where(mask[:, 1:], moved, zero).sum(dim=1)
    last = mask.long().sum(dim=1) - 1
    return total + end[tags.gather(1, last.unsqueeze(1)).squeeze(1)]


def crf_log_partition(
    emissions: torch.Tensor,
    mask: torch.Tensor | None,
    transitions: torch.Tensor,
    start: torch.Tensor,
    end: torch.Tensor,
) -> torch.Tensor:
    """``log Z`` by the forward algorithm in log space (module docstring): ``(B,)``.

    Example:
        >>> e = torch.zeros(1, 2, 2)  # 4 paths of score 0
        >>> round(crf_log_partition(e, None, torch.zeros(2, 2), torch.zeros(2), torch.zeros(2)).item(), 4)
        1.3863
    """
    mask = _checked_mask(emissions, mask)
    steps = emissions.transpose(0, 1)  # (T, B, K): one contiguous (B, K) slice per step
    on = mask.transpose(0, 1).unsqueeze(2)  # (T, B, 1)
    alpha = start + steps[0]
    for t in range(1, steps.shape[0]):
        # the next tag's emission is the same for every previous tag: added after the reduction
        nxt = torch.logsumexp(alpha.unsqueeze(2) + transitions, dim=1) + steps[t]
        alpha = torch.where(on[t], nxt, alpha)
    return torch.logsumexp(alpha + end, dim=1)


def crf_log_likelihood(
    emissions: torch.Tensor,
    tags: torch.Tensor,
    mask: torch.Tensor | None,
    transitions: torch.Tensor,
    start: torch.Tensor,
    end: torch.Tensor,
) -> torch.Tensor:
    """``log p(tags | emissions) = score(tags) - log Z``, ``(B,)`` (nlp-best-practices.txt, "CRF output layer").

    Example:
        >>> e = torch.zeros(1, 2, 2)
        >>> round(crf_log_likelihood(e, torch.tensor([[0, 1]]), None, torch.zeros(2, 2), torch.zeros(2),
        ...                          torch.zeros(2)).exp().item(), 4)
        0.25
    """
    score = crf_path_score(emissions, tags, mask, transitions, start, end)
    return score - crf_log_partition(emissions, mask, transitions, start, end)


@torch.no_grad()
def viterbi_decode(
    emissions: torch.Tensor,
    mask: torch.Tensor | None,
    transitions: torch.Tensor,
    start: torch.Tensor,
    end: torch.Tensor,
    *,
    pad: int = -1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The highest-scoring tag path of every sequence, back-tracked for the whole batch at once.

    Args:
        emissions, mask, transitions, start, end: as :func:`crf_path_score`.
        pad: the tag id written at padded steps.

    Returns:
        ``(best_score (B,), tags (B, T))``; ``tags`` holds ``pad`` past each row's length.

    Example:
        >>> e = torch.tensor([[[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]])
        >>> score, tags = viterbi_decode(e, torch.tensor([[True, True, False]]), torch.zeros(2, 2),
        ...                              torch.zeros(2), torch.zeros(2))
        >>> score.tolist(), tags.tolist()
        ([2.0], [[1, 0, -1]])
    """
    mask = _checked_mask(emissions, mask)
    steps = emissions.transpose(0, 1)
    on = mask.transpose(0, 1).unsqueeze(2)
    num_steps, batch, k = steps.shape
    identity = torch.arange(k, device=emissions.device).expand(batch, k)
    pointers = []
    score = start + steps[0]
    for t in range(1, num_steps):
        best, arg = (score.unsqueeze(2) + transitions).max(dim=1)
        score = torch.where(on[t], best + steps[t], score)
        pointers.append(torch.where(on[t], arg, identity))  # a padded step points back to the same tag
    best_score, last = (score + end).max(dim=1)
    path = [last]
    for back in reversed(pointers):
        last = back.gather(1, last.unsqueeze(1)).squeeze(1)
        path.append(last)
    tags = torch.stack(path[::-1], dim=1)
    return best_score, tags.masked_fill(~mask, pad)

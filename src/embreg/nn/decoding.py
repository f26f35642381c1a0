"""Greedy and batched beam-search decoding for any encoder-decoder, with GNMT's length and coverage penalties.

A model decodes through a small protocol, :class:`EncoderDecoder`: ``encode(source) -> (memory, source_padding)``
and ``decode_step(prefix, memory, source_padding) -> (log_probs, cross_attention)``, plus the ids ``bos_id``,
``eos_id`` and ``pad_id``. ``cross_attention`` is the attention distribution of the prefix's last position over
the source positions, as the model chooses to expose it (:class:`embreg.models.transformer_nmt.TransformerTranslator`
gives its last decoder layer's cross-attention averaged over the heads).

Scoring (GNMT, Wu et al. 2016, Sec. 7; nlp-best-practices.txt, "Beam search"):
``s(Y, X) = log P(Y | X) / lp(Y) + cp(X; Y)`` with

* ``lp(Y) = (5 + |Y|)^alpha / (5 + 1)^alpha`` (:func:`length_penalty`; ``alpha = 0``: no normalisation),
* ``cp(X; Y) = beta * sum_i log(min(sum_j p_ij, 1.0))`` (:func:`coverage_penalty`; ``beta = 0``: none), ``i``
  over the source's non-padding positions and ``j`` over the generated tokens (the step that produced each).

``|Y|`` counts the generated tokens, ``</s>`` included. The hypothesis space is every sequence of at most
``max_len`` tokens that ends with ``</s>``, or has exactly ``max_len`` tokens and no ``</s>`` (cut off); ``<pad>``
and ``<s>`` are never generated. Beam search ranks finished and live hypotheses by the same score ``s``; a
hypothesis that ends with ``</s>`` among the ``K`` best candidates of a step leaves the beam, the ``K`` best
candidates that do not end keep it full, and a source is done once ``K`` hypotheses have finished (or at
``max_len``). With ``K = 1`` this is greedy decoding; with ``K`` at least the number of hypotheses every
prefix is kept and the search returns the optimum of ``s``.

Example:
    >>> round(length_penalty(3, 0.6), 4), length_penalty(7, 0.0)
    (1.1884, 1.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch

__all__ = [
    "EncoderDecoder",
    "Decoded",
    "length_penalty",
    "coverage_penalty",
    "greedy_decode",
    "beam_search",
    "sequence_score",
]

_TINY = 1e-30  # log(0) guard for coverage sums of a real source position (a softmax is never exactly 0)


class EncoderDecoder(Protocol):
    """What :func:`greedy_decode` and :func:`beam_search` call (see the module docstring)."""

    bos_id: int
    eos_id: int
    pad_id: int

    def encode(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``source (B, S)`` ids -> ``memory (B, S, ...)`` and ``source_padding (B, S)`` bool (True: padding)."""
        ...

    def decode_step(
        self, prefix: torch.Tensor, memory: torch.Tensor, source_padding: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``prefix (N, t)`` (``<s>`` first) -> next-token log-probabilities ``(N, V)`` and the cross-attention of
        the last position ``(N, S)`` (rows sum to 1 over the non-padding source positions)."""
        ...


@dataclass
class Decoded:
    """One hypothesis per source: ``tokens[b]`` (without ``<s>`` and ``</s>``), its score ``s`` and ``log P``."""

    tokens: list[list[int]]
    scores: list[float]
    log_probs: list[float]


def length_penalty(length: int | torch.Tensor, alpha: float) -> float | torch.Tensor:
    """GNMT's ``lp(Y) = (5 + |Y|)^alpha / (5 + 1)^alpha`` (Wu et al. 2016, Sec. 7).

    Example:
        >>> length_penalty(1, 1.0), round(length_penalty(10, 1.0), 4)
        (1.0, 2.5)
    """
    return ((5 + length) ** alpha) / (6**alpha)


def coverage_penalty(attention_sums: torch.Tensor, source_padding: torch.Tensor, beta: float) -> torch.Tensor:
    """GNMT's ``cp = beta * sum_i log(min(sum_j p_ij, 1.0))`` over the non-padding source positions ``i``.

    Args:
        attention_sums: ``(..., S)`` the summed attention ``sum_j p_ij`` of each source position.
        source_padding: ``(..., S)`` bool, True at padding (left out of the sum), broadcastable.
        beta: the weight (``0``: the penalty is 0).

    Example:
        >>> sums = torch.tensor([[0.5, 1.5, 0.0]])
        >>> round(coverage_penalty(sums, torch.tensor([[False, False, True]]), 0.2).item(), 4)
        -0.1386
    """
    if beta == 0:
        return torch.zeros(attention_sums.shape[:-1], dtype=attention_sums.dtype, device=attention_sums.device)
    logs = torch.log(attention_sums.clamp(max=1.0).clamp_min(_TINY)).masked_fill(source_padding, 0.0)
    return beta * logs.sum(dim=-1)


def _check(model: EncoderDecoder, source: torch.Tensor, max_len: int) -> None:
    if source.dim() != 2 or source.shape[0] == 0:
        raise ValueError(f"source must be (B, S) with B >= 1, got shape {tuple(source.shape)}")
    if max_len < 1:
        raise ValueError(f"max_len={max_len} must be >= 1")
    for name in ("bos_id", "eos_id", "pad_id"):
        if not isinstance(getattr(model, name, None), int):
            raise TypeError(f"the model must have an int {name} to decode (EncoderDecoder protocol)")


def _step(
    model: EncoderDecoder, prefix, memory, padding, active: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token log-probabilities ``(N, V)`` (``<pad>`` and ``<s>`` at -inf) and cross-attention ``(N, S)``.

    ``active`` ``(N,)`` bool: only those rows are run through the model (finished or dead hypotheses cost nothing);
    the others get -inf log-probabilities and zero attention."""
    if active is not None and not bool(active.all()):
        rows = active.nonzero().squeeze(1)
        part_log_probs, part_attention = model.decode_step(prefix[rows], memory[rows], padding[rows])
        log_probs = torch.full(
            (prefix.shape[0], part_log_probs.shape[-1]), -math.inf, device=prefix.device, dtype=torch.float32
        )
        attention = torch.zeros(prefix.shape[0], padding.shape[1], device=prefix.device, dtype=torch.float32)
        log_probs[rows] = part_log_probs.float()
        attention[rows] = part_attention.float()
    else:
        log_probs, attention = model.decode_step(prefix, memory, padding)
        log_probs, attention = log_probs.float().clone(), attention.float()
    log_probs[:, model.pad_id] = -math.inf  # never generated
    log_probs[:, model.bos_id] = -math.inf
    return log_probs, attention


@torch.no_grad()
def greedy_decode(model: EncoderDecoder, source: torch.Tensor, max_len: int) -> Decoded:
    """The most probable next token at every step, until ``</s>`` or ``max_len`` tokens.

    Args:
        model: an :class:`EncoderDecoder` (in eval mode for deterministic output).
        source: ``(B, S)`` source ids, right-padded with ``model.pad_id``.
        max_len: most tokens generated per source (``</s>`` included).

    Returns:
        :class:`Decoded` with the plain ``log P`` as the score (``alpha = beta = 0``).
    """
    _check(model, source, max_len)
    memory, padding = model.encode(source)
    batch = source.shape[0]
    prefix = torch.full((batch, 1), model.bos_id, dtype=torch.long, device=source.device)
    total = torch.zeros(batch, device=source.device)
    alive = torch.ones(batch, dtype=torch.bool, device=source.device)
    lengths = torch.full((batch,), max_len, dtype=torch.long, device=source.device)
    for step in range(max_len):
        log_probs, _ = _step(model, prefix, memory, padding, alive)
        best, token = log_probs.max(dim=-1)
        total = torch.where(alive, total + best, total)
        token = torch.where(alive, token, torch.full_like(token, model.pad_id))
        prefix = torch.cat([prefix, token.unsqueeze(1)], dim=1)
        ended = alive & (token == model.eos_id)
        lengths = torch.where(ended, torch.full_like(lengths, step + 1), lengths)
        alive = alive & ~ended
        if not bool(alive.any()):
            break
    tokens = []
    for row, length in zip(prefix[:, 1:].tolist(), lengths.tolist()):
        kept = row[:length]
        tokens.append(kept[:-1] if kept and kept[-1] == model.eos_id else kept)
    scores = total.tolist()
    return Decoded(tokens, scores, list(scores))


@torch.no_grad()
def beam_search(
    model: EncoderDecoder,
    source: torch.Tensor,
    max_len: int,
    beam: int = 5,
    alpha: float = 0.0,
    beta: float = 0.0,
) -> Decoded:
    """Batched beam search ranking hypotheses by ``s(Y, X)`` (module docstring).

    Args:
        model: an :class:`EncoderDecoder` (in eval mode).
        source: ``(B, S)`` source ids, right-padded with ``model.pad_id``.
        max_len: most tokens generated per source (``</s>`` included).
        beam: ``K``, hypotheses kept per source (``1``: greedy decoding).
        alpha: length normalisation exponent (GNMT: 0.6-0.7; ``0``: none).
        beta: coverage penalty weight (GNMT: 0.2; ``0``: none).

    Returns:
        :class:`Decoded`: the best-scoring hypothesis of each source.

    Example:
        >>> from embreg.models.transformer_nmt import TransformerTranslator
        >>> model = TransformerTranslator(12, 12, d_model=16, heads=2, encoder_layers=1, decoder_layers=1,
        ...                               feedforward=32, dropout=0.0).eval()
        >>> src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
        >>> beam_search(model, src, max_len=5, beam=1).tokens == greedy_decode(model, src, max_len=5).tokens
        True
    """
    _check(model, source, max_len)
    if beam < 1:
        raise ValueError(f"beam={beam} must be >= 1")
    memory, padding = model.encode(source)
    batch, width, device = source.shape[0], beam, source.device
    memory = memory.repeat_interleave(width, dim=0)
    padding_k = padding.repeat_interleave(width, dim=0)
    prefix = torch.full((batch * width, 1), model.bos_id, dtype=torch.long, device=device)
    log_p = torch.full((batch, width), -math.inf, device=device)
    log_p[:, 0] = 0.0
    coverage = torch.zeros(batch, width, source.shape[1], device=device)
    live_score = log_p.clone()
    finished: list[list[tuple[float, float, list[int]]]] = [[] for _ in range(batch)]
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    source_padding = padding.unsqueeze(1)  # (B, 1, S)
    for step in range(max_len):
        active = (torch.isfinite(log_p) & ~done.unsqueeze(1)).view(-1)
        log_probs, attention = _step(model, prefix, memory, padding_k, active)
        vocab = log_probs.shape[-1]
        cand_log_p = log_p.unsqueeze(-1) + log_probs.view(batch, width, vocab)  # (B, K, V)
        new_coverage = coverage + attention.view(batch, width, -1)
        penalty = coverage_penalty(new_coverage, source_padding, beta)  # (B, K)
        cand_score = cand_log_p / length_penalty(step + 1, alpha) + penalty.unsqueeze(-1)
        cand_score = cand_score.masked_fill(done.view(batch, 1, 1), -math.inf)
        flat = cand_score.view(batch, width * vocab)
        count = min(2 * width, width * vocab)
        top_score, top_index = flat.topk(count, dim=-1)  # (B, 2K) best first
        top_token = top_index % vocab
        is_eos = top_token == model.eos_id
        # finished: </s> among the K best candidates of a source
        ending = is_eos & (torch.arange(count, device=device) < width) & torch.isfinite(top_score)
        if bool(ending.any()):
            flat_log_p = cand_log_p.view(batch, width * vocab)
            for b, position in ending.nonzero().tolist():
                index = int(top_index[b, position])
                origin = b * width + index // vocab
                tokens = prefix[origin, 1:].tolist()
                finished[b].append((float(top_score[b, position]), float(flat_log_p[b, index]), tokens))
        # live: the K best candidates that do not end (their order among the 2K kept)
        rank = torch.where(is_eos, count + torch.arange(count, device=device), torch.arange(count, device=device))
        keep = rank.argsort(dim=-1)[:, :width]
        chosen_index = top_index.gather(1, keep)
        chosen_score = top_score.gather(1, keep).masked_fill(is_eos.gather(1, keep), -math.inf)
        origin = chosen_index // vocab  # (B, K) beam each candidate extends
        token = chosen_index % vocab
        rows = (torch.arange(batch, device=device).unsqueeze(1) * width + origin).view(-1)
        log_p = cand_log_p.view(batch, width * vocab).gather(1, chosen_index)
        log_p = log_p.masked_fill(~torch.isfinite(chosen_score), -math.inf)
        live_score = chosen_score
        coverage = new_coverage.view(batch * width, -1)[rows].view(batch, width, -1)
        prefix = torch.cat([prefix[rows], token.view(-1, 1)], dim=1)
        counts = torch.tensor([len(f) for f in finished], device=device)
        done = done | (counts >= width) | ~torch.isfinite(log_p).any(dim=1)
        if bool(done.all()):
            break
    else:  # max_len reached: live hypotheses are cut off and compete as they are
        for b in range(batch):
            if len(finished[b]) >= width:
                continue
            for k in range(width):
                if math.isfinite(float(live_score[b, k])):
                    finished[b].append(
                        (float(live_score[b, k]), float(log_p[b, k]), prefix[b * width + k, 1:].tolist())
                    )
    tokens, scores, log_probs_out = [], [], []
    for b in range(batch):
        if not finished[b]:
            raise RuntimeError(f"beam search found no hypothesis for source {b}: every candidate had score -inf")
        score, lp_value, best = max(finished[b], key=lambda item: item[0])
        tokens.append(best)
        scores.append(score)
        log_probs_out.append(lp_value)
    return Decoded(tokens, scores, log_probs_out)


@torch.no_grad()
def sequence_score(
    model: EncoderDecoder,
    source: torch.Tensor,
    tokens: list[int],
    alpha: float = 0.0,
    beta: float = 0.0,
    *,
    ended: bool = True,
) -> float:
    """``s(Y, X)`` of one hypothesis by teacher forcing (the reference the searches are tested against).

    Args:
        source: ``(1, S)`` source ids.
        tokens: ``Y`` without ``<s>`` and ``</s>``.
        ended: ``Y`` ends with ``</s>`` (else it is a cut-off hypothesis of ``max_len`` tokens).
    """
    memory, padding = model.encode(source)
    sequence = [*tokens, model.eos_id] if ended else list(tokens)
    prefix = torch.tensor([[model.bos_id]], dtype=torch.long, device=source.device)
    total, coverage = 0.0, torch.zeros(source.shape[1], device=source.device)
    for token in sequence:
        log_probs, attention = _step(model, prefix, memory, padding)
        total += float(log_probs[0, token])
        coverage = coverage + attention[0]
        prefix = torch.cat([prefix, torch.tensor([[token]], device=source.device)], dim=1)
    penalty = float(coverage_penalty(coverage.unsqueeze(0), padding, beta)[0])
    return total / float(length_penalty(len(sequence), alpha)) + penalty

"""Greedy and batched beam-search decoding for any encoder-decoder, with GNMT's length and coverage penalties.

A model decodes through a small protocol, :class:`EncoderDecoder`: ``encode(source) -> (memory, source_padding)``
and ``decode_step(prefix, memory, source_padding) -> (log_probs, cross_attention)``, plus the ids ``bos_id``,
``eos_id`` and ``pad_id``. ``cross_attention`` is the attention distribution of the prefix's last position over
the source positions, as the model chooses to expose it (:class:`embreg.models.transformer_nmt.TransformerTranslator`
gives its last decoder layer's cross-attention averaged over the heads).

A model may add the incremental extension :class:`IncrementalDecoder` (``start_decoding``, ``decode_next``,
``reorder``): the searches then feed it one new token per hypothesis and step from its own state (the translator
keeps cached keys and values) instead of re-running ``decode_step`` over the whole prefix; the scores and the
search are the same (:mod:`embreg.nn.decoding_steps`). Decoding is meant for eval mode (dropout off); a model in
training mode is decoded through ``decode_step``.

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
``max_len``; it may stop earlier once no live hypothesis can beat its best finished one, which returns the same
hypothesis: :func:`beam_search`). With ``K = 1`` this is greedy decoding; with ``K`` at least the number of
hypotheses every prefix is kept and the search returns the optimum of ``s``.

Example:
    >>> round(length_penalty(3, 0.6), 4), length_penalty(7, 0.0)
    (1.1884, 1.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from embreg.nn.decoding_steps import PrefixStepper, make_stepper

__all__ = [
    "EncoderDecoder",
    "IncrementalDecoder",
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


class IncrementalDecoder(EncoderDecoder, Protocol):
    """The optional incremental extension of :class:`EncoderDecoder`: one new token per row and step, from a state
    the model keeps (e.g. cached keys and values), instead of the whole prefix.

    The searches use it automatically when a model has all three methods and is not in training mode
    (:func:`embreg.nn.decoding_steps.is_incremental`); it must give what ``decode_step`` gives on the prefix the
    state holds plus the new tokens. The state is the model's own object; the searches only pass it back.
    """

    def start_decoding(self, memory: torch.Tensor, source_padding: torch.Tensor) -> Any:
        """The state of ``B`` rows, one per source of ``memory (B, S, ...)``, before ``<s>``."""
        ...

    def decode_next(self, tokens: torch.Tensor, state: Any) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """Append ``tokens (N,)`` (the first call: ``<s>``) -> next-token log-probabilities ``(N, V)``, the
        cross-attention of the new position ``(N, S)`` and the state one token longer. The returned tensors are
        new (the searches mask ``<pad>`` and ``<s>`` in them in place)."""
        ...

    def reorder(self, state: Any, rows: torch.Tensor) -> Any:
        """The state of rows ``rows (N',)``, indices into the state's rows (repeats allowed): beam search's origin
        beams, or the rows still decoding."""
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


@torch.no_grad()
def greedy_decode(model: EncoderDecoder, source: torch.Tensor, max_len: int) -> Decoded:
    """The most probable next token at every step, until ``</s>`` or ``max_len`` tokens.

    A model with the incremental extension (:class:`IncrementalDecoder`) in eval mode is decoded from its cache;
    rows that end leave the model calls.

    Args:
        model: an :class:`EncoderDecoder` (in eval mode for deterministic output).
        source: ``(B, S)`` source ids, right-padded with ``model.pad_id``.
        max_len: most tokens generated per source (``</s>`` included).

    Returns:
        :class:`Decoded` with the plain ``log P`` as the score (``alpha = beta = 0``).
    """
    _check(model, source, max_len)
    memory, padding = model.encode(source)
    stepper = make_stepper(model, memory, padding)
    batch, device = source.shape[0], source.device
    rows = torch.arange(batch, device=device)  # the source of each row still decoding
    token = torch.full((batch,), model.bos_id, dtype=torch.long, device=device)
    generated = torch.full((batch, max_len), model.pad_id, dtype=torch.long, device=device)
    total = torch.zeros(batch, device=device)
    lengths = torch.full((batch,), max_len, dtype=torch.long, device=device)
    for step in range(max_len):
        log_probs, _ = stepper.next(token)
        best, token = log_probs.max(dim=-1)
        total[rows] = total[rows] + best
        generated[rows, step] = token
        ended = token == model.eos_id
        if bool(ended.any()):
            lengths[rows[ended]] = step + 1
            kept = (~ended).nonzero().squeeze(1)
            if kept.numel() == 0:
                break
            rows, token = rows[kept], token[kept]
            stepper.keep(kept)
    tokens = []
    for row, length in zip(generated.tolist(), lengths.tolist()):
        kept_tokens = row[:length]
        tokens.append(kept_tokens[:-1] if kept_tokens and kept_tokens[-1] == model.eos_id else kept_tokens)
    scores = total.tolist()
    return Decoded(tokens, scores, list(scores))


def _bound_length_penalty(step: int, max_len: int, alpha: float) -> float:
    """The largest ``lp`` a hypothesis live after ``step`` (``step + 1`` tokens) can still end with."""
    return max(float(length_penalty(step + 2, alpha)), float(length_penalty(max_len, alpha)))


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

    The search runs the model on the live hypotheses of unfinished sources only (one row per source at the first
    step, where every beam is ``<s>``), from the model's cache when it has the incremental extension
    (:class:`IncrementalDecoder`, eval mode). Each row proposes its ``2K`` most probable tokens (the ``2K`` best
    candidates of a source are among them, as ``s`` grows with ``log P`` within a row); finished hypotheses are
    kept as a running best per source (the first of equal scores wins) and a count, on the device. A source also
    stops once no live hypothesis can still beat its best finished one: ``log P`` only falls, ``cp <= 0`` and
    ``lp`` is at most ``max(lp(t + 1), lp(max_len))``, so ``log P / max lp`` bounds every score a live
    hypothesis can still reach (with ``alpha, beta >= 0``; the result is the one the search without the rule
    returns).

    Args:
        model: an :class:`EncoderDecoder` (in eval mode).
        source: ``(B, S)`` source ids, right-padded with ``model.pad_id``.
        max_len: most tokens generated per source (``</s>`` included).
        beam: ``K``, hypotheses kept per source (``1``: greedy decoding).
        alpha: length normalisation exponent (GNMT: 0.6-0.7; ``0``: none).
        beta: coverage penalty weight (GNMT: 0.2; ``0``: none).

    Returns:
        :class:`Decoded`: the best-scoring hypothesis of each source.

    Raises:
        ValueError: ``beam < 1``, ``max_len < 1`` or a source that is not ``(B, S)``.

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
    stepper = make_stepper(model, memory, padding)
    batch, width, device = source.shape[0], beam, source.device
    flat_rows = batch * width
    source_padding = padding.unsqueeze(1)  # (B, 1, S)
    # the beam (flat index b * K + k) of each row the stepper holds: beam 0 of every source at step 0
    row_beam = torch.arange(batch, device=device) * width
    token = torch.full((batch,), model.bos_id, dtype=torch.long, device=device)
    log_p = torch.full((batch, width), -math.inf, device=device)
    log_p[:, 0] = 0.0
    history = torch.full((flat_rows, max_len), model.pad_id, dtype=torch.long, device=device)
    coverage = torch.zeros(flat_rows, source.shape[1], device=device) if beta != 0 else None
    best_score = torch.full((batch,), -math.inf, device=device)
    best_log_p = torch.full((batch,), -math.inf, device=device)
    best_tokens = torch.full((batch, max_len), model.pad_id, dtype=torch.long, device=device)
    best_length = torch.zeros(batch, dtype=torch.long, device=device)
    finished = torch.zeros(batch, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    sources = torch.arange(batch, device=device)
    positions = torch.arange(2 * width, device=device)
    bounded = beta >= 0  # cp <= 0, so the bound on live hypotheses holds
    live_score = log_p
    for step in range(max_len):
        log_probs, attention = stepper.next(token)  # (N, V), (N, S) of the rows in row_beam
        vocab = log_probs.shape[-1]
        per_row = min(2 * width, vocab)
        row_top, row_token = log_probs.topk(per_row, dim=-1)  # each row's best tokens, best first
        cand_log_p = torch.full((flat_rows, per_row), -math.inf, device=device)
        cand_log_p[row_beam] = log_p.view(-1)[row_beam].unsqueeze(1) + row_top
        cand_token = torch.zeros(flat_rows, per_row, dtype=torch.long, device=device)
        cand_token[row_beam] = row_token
        cand_score = cand_log_p.view(batch, width, per_row) / length_penalty(step + 1, alpha)
        new_coverage = None
        if coverage is not None:
            new_coverage = coverage.index_add(0, row_beam, attention)
            penalty = coverage_penalty(new_coverage.view(batch, width, -1), source_padding, beta)  # (B, K)
            cand_score = cand_score + penalty.unsqueeze(-1)
        flat_score = cand_score.view(batch, width * per_row)
        count = min(2 * width, width * per_row)
        top_score, top_index = flat_score.topk(count, dim=-1)  # (B, 2K) best first
        top_token = cand_token.view(batch, width * per_row).gather(1, top_index)
        top_log_p = cand_log_p.view(batch, width * per_row).gather(1, top_index)
        top_beam = sources.unsqueeze(1) * width + top_index // per_row  # the beam each candidate extends
        is_eos = top_token == model.eos_id
        # finished: </s> among the K best candidates of a source; the first (best) of them may beat the best so far
        ending = is_eos & (positions[:count] < width) & torch.isfinite(top_score)
        first = torch.where(ending, positions[:count], count).min(dim=1).values.clamp(max=count - 1).unsqueeze(1)
        first_score = top_score.gather(1, first).squeeze(1)
        better = ending.any(dim=1) & (first_score > best_score)
        best_score = torch.where(better, first_score, best_score)
        best_log_p = torch.where(better, top_log_p.gather(1, first).squeeze(1), best_log_p)
        best_tokens = torch.where(better.unsqueeze(1), history[top_beam.gather(1, first).squeeze(1)], best_tokens)
        best_length = torch.where(better, step, best_length)
        finished = finished + ending.sum(dim=1)
        # live: the K best candidates that do not end (their order among the 2K kept)
        rank = torch.where(is_eos, count + positions[:count], positions[:count])
        keep = rank.argsort(dim=-1)[:, :width]
        live_score = top_score.gather(1, keep).masked_fill(is_eos.gather(1, keep), -math.inf)
        origin = top_beam.gather(1, keep).view(-1)  # (B * K,) the beam each new beam extends
        log_p = top_log_p.gather(1, keep).masked_fill(~torch.isfinite(live_score), -math.inf)
        history = history[origin]
        history[:, step] = top_token.gather(1, keep).view(-1)
        if new_coverage is not None:
            coverage = new_coverage[origin]
        done = done | (finished >= width) | ~torch.isfinite(log_p).any(dim=1)
        if bounded and step + 1 < max_len:
            reachable = (log_p / _bound_length_penalty(step, max_len, alpha)).max(dim=1).values
            done = done | (best_score >= reachable)
        if step + 1 == max_len or bool(done.all()):
            break
        log_p = log_p.masked_fill(done.unsqueeze(1), -math.inf)
        next_beam = torch.isfinite(log_p).view(-1).nonzero().squeeze(1)
        row_of_beam = torch.full((flat_rows,), -1, dtype=torch.long, device=device)
        row_of_beam[row_beam] = torch.arange(row_beam.shape[0], device=device)
        stepper.keep(row_of_beam[origin[next_beam]])
        row_beam, token = next_beam, history[next_beam, step]
    if step + 1 == max_len:  # max_len reached: live hypotheses are cut off and compete as they are
        cut = live_score.masked_fill((finished >= width).unsqueeze(1), -math.inf)
        cut_score, cut_beam = cut.max(dim=1)  # the first of equal scores
        better = torch.isfinite(cut_score) & (cut_score > best_score)
        flat_beam = sources * width + cut_beam
        best_score = torch.where(better, cut_score, best_score)
        best_log_p = torch.where(better, log_p.gather(1, cut_beam.unsqueeze(1)).squeeze(1), best_log_p)
        best_tokens = torch.where(better.unsqueeze(1), history[flat_beam], best_tokens)
        best_length = torch.where(better, max_len, best_length)
    tokens, scores, log_probs_out = [], [], []
    for b, (score, value, row, length) in enumerate(
        zip(best_score.tolist(), best_log_p.tolist(), best_tokens.tolist(), best_length.tolist())
    ):
        if not math.isfinite(score):
            raise RuntimeError(f"beam search found no hypothesis for source {b}: every candidate had score -inf")
        tokens.append(row[:length])
        scores.append(score)
        log_probs_out.append(value)
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
    stepper = PrefixStepper(model, memory, padding)  # decode_step on the whole prefix, the reference computation
    total, coverage = 0.0, torch.zeros(source.shape[1], device=source.device)
    for previous, token in zip([model.bos_id, *sequence], sequence):
        log_probs, attention = stepper.next(torch.tensor([previous], device=source.device))
        total += float(log_probs[0, token])
        coverage = coverage + attention[0]
    penalty = float(coverage_penalty(coverage.unsqueeze(0), padding, beta)[0])
    return total / float(length_penalty(len(sequence), alpha)) + penalty

"""The CRF output layer as a module: learned start, transition and end scores, constrained by a tag scheme.

Thin module over :mod:`embreg.nn.crf.functional`; the constraints come from :mod:`embreg.nn.crf.constraints`
(nlp-best-practices.txt, "Sequence labelling": "CRF output layer", "Constrained decoding").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from embreg.errors import ConfigError
from embreg.nn.crf.constraints import SCHEMES, allowed_transitions
from embreg.nn.crf.functional import constrain, crf_log_likelihood, crf_log_partition, viterbi_decode

__all__ = ["CRF"]


class CRF(nn.Module):
    """Linear-chain CRF over ``K`` tags; disallowed scores (by ``scheme``) are ``-inf`` in every computation.

    Args:
        num_tags: ``K`` (>= 1).
        tags: the tag names in id order (needed for ``bio`` and ``iobes``; ``len(tags) == num_tags``).
        scheme: ``bio``, ``iobes`` (invalid starts, transitions and ends impossible) or ``none``.
        init_range: the scores start ``U(-init_range, init_range)``.

    Shapes: emissions ``(B, T, K)``, tags and mask ``(B, T)``; :meth:`forward` returns ``(B,)`` log-likelihoods,
    :meth:`decode` ``(B, T)`` tag ids (``-1`` at padded steps).

    Example:
        >>> crf = CRF(3, tags=["O", "B-PER", "I-PER"], scheme="bio")
        >>> emissions = torch.randn(2, 4, 3)
        >>> mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
        >>> crf(emissions, torch.zeros(2, 4, dtype=torch.long), mask).shape
        torch.Size([2])
        >>> crf.decode(emissions, mask)[1, 2:].tolist()
        [-1, -1]
    """

    start_allowed: torch.Tensor
    transitions_allowed: torch.Tensor
    end_allowed: torch.Tensor

    def __init__(
        self, num_tags: int, *, tags: Sequence[str] | None = None, scheme: str = "none", init_range: float = 0.1
    ) -> None:
        super().__init__()
        if isinstance(num_tags, bool) or not isinstance(num_tags, int) or num_tags < 1:
            raise ConfigError(f"num_tags={num_tags!r} must be an int >= 1")
        if scheme not in SCHEMES:
            raise ConfigError(f"scheme={scheme!r} must be one of {', '.join(SCHEMES)}")
        if scheme != "none" and tags is None:
            raise ConfigError(f"scheme={scheme!r} needs the tag names (tags=[...]) to know which transitions to bar")
        if tags is not None and len(tags) != num_tags:
            raise ConfigError(f"{len(tags)} tag names for num_tags={num_tags}")
        self.num_tags = num_tags
        self.scheme = scheme
        self.tags = list(tags) if tags is not None else None
        names = self.tags if self.tags is not None else [str(i) for i in range(num_tags)]
        start_ok, trans_ok, end_ok = allowed_transitions(names, scheme)
        self.register_buffer("start_allowed", start_ok, persistent=False)
        self.register_buffer("transitions_allowed", trans_ok, persistent=False)
        self.register_buffer("end_allowed", end_ok, persistent=False)
        self.start_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-init_range, init_range))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-init_range, init_range))
        self.end_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-init_range, init_range))

    def scores(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(transitions (K, K), start (K,), end (K,))`` with the disallowed entries at ``-inf``."""
        if self.scheme == "none":
            return self.transitions, self.start_transitions, self.end_transitions
        return (
            constrain(self.transitions, self.transitions_allowed),
            constrain(self.start_transitions, self.start_allowed),
            constrain(self.end_transitions, self.end_allowed),
        )

    def _checked(self, emissions: torch.Tensor) -> torch.Tensor:
        """``emissions`` checked for shape; half-precision ones (autocast) in float32, since the path score and
        ``log Z`` sum over the whole sequence and their difference is the log-likelihood."""
        if emissions.dim() != 3 or emissions.shape[-1] != self.num_tags:
            raise ConfigError(f"emissions must be (B, T, {self.num_tags}), got shape {tuple(emissions.shape)}")
        if emissions.dtype in (torch.float16, torch.bfloat16):
            return emissions.float()
        return emissions

    def forward(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``log p(tags | emissions)`` per sequence, ``(B,)``."""
        emissions = self._checked(emissions)
        transitions, start, end = self.scores()
        return crf_log_likelihood(emissions, tags, mask, transitions, start, end)

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``log Z`` per sequence, ``(B,)``."""
        emissions = self._checked(emissions)
        transitions, start, end = self.scores()
        return crf_log_partition(emissions, mask, transitions, start, end)

    def decode(self, emissions: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The Viterbi path of every sequence, ``(B, T)`` (``-1`` at padded steps); never a disallowed one."""
        emissions = self._checked(emissions)
        transitions, start, end = self.scores()
        return viterbi_decode(emissions, mask, transitions, start, end)[1]

    def extra_repr(self) -> str:
        return f"num_tags={self.num_tags}, scheme={self.scheme!r}"

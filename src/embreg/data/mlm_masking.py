"""BERT's masking for masked-LM training: which tokens are predicted and what the encoder sees in their place.

Devlin et al. (2019), Sec. 3.1 (cited by sse-stochastic-shared-embeddings.txt, Sec. 4.4): a share ``rate`` of the
tokens is selected for prediction (15%); of the selected, ``mask_share`` become ``[MASK]`` (80%), ``random_share``
become a random token (10%) and the rest keep their id (10%). The loss is taken on the selected positions only.
Special tokens ([CLS], [SEP], [PAD], [UNK], [MASK]) and padding are never selected, and a random replacement is
never a special id (drawn uniformly among the others).

The SSE paper (Sec. 4.4) reads the random replacement as SSE-SE on the inputs: a token is replaced by a uniformly
drawn other token with probability ``rate * random_share`` (0.15 x 0.1 = 0.015), and a masked token is replaced too.
:func:`implicit_sse_rate` gives both numbers for a setting.

Example:
    >>> g = torch.Generator().manual_seed(0)
    >>> ids = torch.tensor([[101, 7, 8, 9, 102, 0]])
    >>> masking = BertMasking(vocab_size=200, special_ids=(0, 100, 101, 102, 103), mask_id=103, rate=0.5)
    >>> inputs, labels = masking(ids, torch.tensor([[1, 1, 1, 1, 1, 0]]), g)
    >>> inputs.shape == labels.shape, int(labels[0, 0]), int(labels[0, 5])  # [CLS] and padding: never predicted
    (True, -100, -100)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from embreg.errors import ConfigError

__all__ = ["BertMasking", "IGNORE_INDEX", "implicit_sse_rate"]

IGNORE_INDEX = -100
"""Label of a position that is not predicted (cross-entropy's ``ignore_index``)."""


def implicit_sse_rate(rate: float, mask_share: float, random_share: float) -> dict[str, float]:
    """The token-replacement rates BERT's masking applies at these settings (per non-special token).

    Returns:
        ``random``: replaced by a uniformly drawn other token (the SSE paper's SSE-SE equivalent, Sec. 4.4);
        ``masked``: replaced by ``[MASK]``; ``replaced``: either; ``selected``: predicted (``rate``).

    Example:
        >>> {k: round(v, 4) for k, v in implicit_sse_rate(0.15, 0.8, 0.1).items()}
        {'selected': 0.15, 'masked': 0.12, 'random': 0.015, 'replaced': 0.135}
    """
    return {
        "selected": rate,
        "masked": rate * mask_share,
        "random": rate * random_share,
        "replaced": rate * (mask_share + random_share),
    }


@dataclass
class BertMasking:
    """Draws BERT's masking for a batch of token ids (see the module docstring).

    Args:
        vocab_size: V, the tokenizer's vocabulary size (random replacements are drawn in [0, V)).
        special_ids: ids never selected and never drawn as replacements (the tokenizer's ``all_special_ids``).
        mask_id: the ``[MASK]`` id.
        rate: share of the (non-special, non-padding) tokens selected for prediction, in (0, 1].
        mask_share, random_share: shares of the selected tokens replaced by ``[MASK]`` / by a random token; the
            rest (``1 - mask_share - random_share``) keep their id.

    Shapes:
        input_ids, attention_mask: ``(B, T)``; returns ``(inputs, labels)`` both ``(B, T)``, ``labels`` holding the
        original id at selected positions and :data:`IGNORE_INDEX` elsewhere.
    """

    vocab_size: int
    special_ids: Iterable[int]
    mask_id: int
    rate: float = 0.15
    mask_share: float = 0.8
    random_share: float = 0.1

    def __post_init__(self) -> None:
        if not 0 < self.rate <= 1:
            raise ConfigError(f"mask rate={self.rate} must be in (0, 1]")
        for name in ("mask_share", "random_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be in [0, 1]")
        if self.mask_share + self.random_share > 1 + 1e-9:
            raise ConfigError(
                f"mask_share + random_share = {self.mask_share + self.random_share} must be <= 1 (the rest keep "
                "their id)"
            )
        self.special_ids = tuple(sorted({int(i) for i in self.special_ids}))
        if self.mask_id not in self.special_ids:
            self.special_ids = tuple(sorted({*self.special_ids, int(self.mask_id)}))
        special = torch.zeros(self.vocab_size, dtype=torch.bool)
        special[list(self.special_ids)] = True
        self._special = special
        self._allowed = torch.nonzero(~special).flatten()
        if self._allowed.numel() < 1:
            raise ConfigError("every id of the vocabulary is special: nothing to draw as a random replacement")

    def __call__(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(inputs, labels)`` for ``input_ids`` ``(B, T)``; every draw comes from ``generator`` (one uniform and
        one replacement per position, so the stream advances by the batch's shape alone)."""
        device = input_ids.device
        special = self._special.to(device)
        candidate = ~special[input_ids]
        if attention_mask is not None:
            candidate &= attention_mask.bool()
        u = torch.rand(input_ids.shape, generator=generator, device=device)
        selected = candidate & (u < self.rate)
        # the same uniform, rescaled inside the selected band, picks mask / random / keep
        share = u / self.rate
        to_mask = selected & (share < self.mask_share)
        to_random = selected & (share >= self.mask_share) & (share < self.mask_share + self.random_share)
        allowed = self._allowed.to(device)
        draws = torch.randint(0, allowed.numel(), input_ids.shape, generator=generator, device=device)
        inputs = torch.where(to_mask, torch.full_like(input_ids, self.mask_id), input_ids)
        inputs = torch.where(to_random, allowed[draws].to(input_ids.dtype), inputs)
        labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
        return inputs, labels

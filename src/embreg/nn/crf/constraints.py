"""Which tag transitions a tagging scheme allows: BIO and IOBES as boolean masks for the CRF.

Reference: nlp-best-practices.txt, "Sequence labelling": *BIO* marks the first token of a segment ``B-``, the
others ``I-``, tokens outside ``O``; *IOBES* adds ``E-`` (last token of a segment) and ``S-`` (single-token
segment); "constrained decoding ... reject[s] erroneous sequences, i.e. such that do not produce valid BIO
transitions". The rules:

* BIO: ``I-X`` may follow only ``B-X`` or ``I-X``; a sequence may not start with ``I-X``.
* IOBES: ``I-X`` and ``E-X`` follow only ``B-X`` or ``I-X``; ``B-*``, ``S-*`` and ``O`` follow only ``O``, ``E-*``,
  ``S-*`` (or start the sequence); a sequence may end only on ``O``, ``E-*`` or ``S-*``.
* ``none``: every transition is allowed (a plain linear-chain CRF).

A disallowed transition becomes ``-inf`` in the CRF's transition scores (:func:`embreg.nn.crf.constrain`), so no
decode can produce it and no probability mass goes to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from embreg.errors import ConfigError

__all__ = ["SCHEMES", "TagScheme", "allowed_transitions", "invalid_transition", "split_tag"]

TagScheme = Literal["bio", "iobes", "none"]
SCHEMES: tuple[str, ...] = ("bio", "iobes", "none")
_PREFIXES = {"bio": ("B", "I"), "iobes": ("B", "I", "E", "S")}


def split_tag(tag: str, scheme: str) -> tuple[str, str]:
    """``(prefix, type)`` of a tag under ``scheme``: ``"B-PER" -> ("B", "PER")``, ``"O" -> ("O", "")``.

    Raises:
        ConfigError: an unknown scheme, or a tag that is neither ``O`` nor ``<prefix>-<type>`` with a prefix of
            the scheme.

    Example:
        >>> split_tag("I-LOC", "bio"), split_tag("O", "iobes")
        (('I', 'LOC'), ('O', ''))
    """
    if scheme not in _PREFIXES:
        raise ConfigError(f"tag scheme {scheme!r} has no prefixes; schemes with prefixes: {', '.join(_PREFIXES)}")
    if tag == "O":
        return "O", ""
    prefix, sep, kind = tag.partition("-")
    if not sep or not kind or prefix not in _PREFIXES[scheme]:
        valid = ", ".join(f"{p}-<type>" for p in _PREFIXES[scheme])
        raise ConfigError(f"tag {tag!r} is not a {scheme.upper()} tag (O, {valid})")
    return prefix, kind


def _follows(prev: tuple[str, str], nxt: tuple[str, str], scheme: str) -> bool:
    (p, pk), (n, nk) = prev, nxt
    if scheme == "bio":
        return n != "I" or (p in ("B", "I") and pk == nk)
    if n in ("I", "E"):
        return p in ("B", "I") and pk == nk
    return p in ("O", "E", "S")


def allowed_transitions(tags: Sequence[str], scheme: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Boolean masks of the allowed ``(start, transition, end)`` scores of ``tags`` under ``scheme``.

    Args:
        tags: the tag names, in the order of the CRF's tag ids.
        scheme: ``bio``, ``iobes`` or ``none`` (everything allowed).

    Returns:
        ``start (K,)``, ``transitions (K, K)`` (``[i, j]``: tag ``j`` may follow tag ``i``) and ``end (K,)``.

    Raises:
        ConfigError: an unknown scheme or a tag the scheme does not have.

    Example:
        >>> start, trans, end = allowed_transitions(["O", "B-PER", "I-PER"], "bio")
        >>> start.tolist(), trans[0].tolist(), trans[1].tolist()
        ([True, True, False], [True, True, False], [True, True, True])
    """
    if scheme not in SCHEMES:
        raise ConfigError(f"tag scheme {scheme!r} is not one of {', '.join(SCHEMES)}")
    k = len(tags)
    if scheme == "none":
        return torch.ones(k, dtype=torch.bool), torch.ones(k, k, dtype=torch.bool), torch.ones(k, dtype=torch.bool)
    parts = [split_tag(t, scheme) for t in tags]
    outside = ("O", "")
    start = torch.tensor([_follows(outside, t, scheme) for t in parts], dtype=torch.bool)
    trans = torch.tensor([[_follows(a, b, scheme) for b in parts] for a in parts], dtype=torch.bool)
    end = torch.tensor([_follows(t, outside, scheme) for t in parts], dtype=torch.bool)
    return start, trans.reshape(k, k), end


def invalid_transition(sequence: Sequence[str], scheme: str) -> int | None:
    """The position of the first tag of ``sequence`` that ``scheme`` does not allow there, or ``None``.

    A sequence that ends where it may not (IOBES: on ``B-``/``I-``) reports ``len(sequence)``.

    Example:
        >>> invalid_transition(["O", "B-PER", "I-PER"], "bio"), invalid_transition(["O", "I-PER"], "bio")
        (None, 1)
        >>> invalid_transition(["B-PER"], "iobes")
        1
    """
    if scheme == "none":
        return None
    outside = ("O", "")
    prev = outside
    for i, tag in enumerate(sequence):
        part = split_tag(tag, scheme)
        if not _follows(prev, part, scheme):
            return i
        prev = part
    return None if _follows(prev, outside, scheme) else len(sequence)

"""Span-level precision, recall and F1 of tag sequences (the CoNLL shared tasks' measure), and token accuracy.

A span is ``(type, first, last)``: BIO opens one at ``B-X`` (or at an ``I-X`` that does not continue a span of type
``X``, as the CoNLL evaluation script reads malformed input), IOBES also at ``S-X`` (closed at once) and closes it
at ``E-X``; ``O`` or another type closes the open span. A predicted span counts only when its type and both ends
equal a gold span's. Micro-averaged over all spans of all sentences; a measure whose denominator is 0 is 0.

Reference: nlp-best-practices.txt, "Sequence labelling" (tagging schemes BIO and IOBES).

Example:
    >>> span_scores([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "B-ORG"]])
    {'precision': 0.5, 'recall': 0.5, 'f1': 0.5}
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["spans", "span_scores", "token_accuracy"]


def spans(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The spans of one tag sequence (module docstring).

    Example:
        >>> sorted(spans(["B-PER", "E-PER", "S-LOC", "I-ORG", "O"]))
        [('LOC', 2, 2), ('ORG', 3, 3), ('PER', 0, 1)]
    """
    found: set[tuple[str, int, int]] = set()
    kind, first = None, 0
    for i, tag in enumerate(tags):
        prefix, _, label = tag.partition("-")
        if tag == "O" or not label:
            if kind is not None:
                found.add((kind, first, i - 1))
            kind = None
            continue
        if prefix in ("B", "S") or kind != label:
            if kind is not None:
                found.add((kind, first, i - 1))
            kind, first = label, i
        if prefix in ("E", "S"):
            found.add((label, first, i))
            kind = None
    if kind is not None:
        found.add((kind, first, len(tags) - 1))
    return found


def span_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro precision, recall and F1 of the spans of ``predicted`` against ``gold`` (one tag list per sentence).

    Raises:
        ValueError: the two have different numbers of sentences, or a sentence differs in length.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    correct = found = wanted = 0
    for i, (g, p) in enumerate(zip(gold, predicted, strict=True)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: {len(g)} gold tags but {len(p)} predicted")
        gs, ps = spans(g), spans(p)
        correct += len(gs & ps)
        found += len(ps)
        wanted += len(gs)
    precision = correct / found if found else 0.0
    recall = correct / wanted if wanted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def token_accuracy(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """The share of tokens whose predicted tag equals the gold tag.

    Example:
        >>> token_accuracy([["O", "B-X"], ["O"]], [["O", "O"], ["O"]])
        0.6666666666666666
    """
    pairs = [(a, b) for g, p in zip(gold, predicted, strict=True) for a, b in zip(g, p, strict=True)]
    return sum(a == b for a, b in pairs) / len(pairs) if pairs else 0.0

"""Span-level precision, recall and F1 against hand-counted cases (BIO and IOBES)."""

from __future__ import annotations

import pytest

from embreg.tasks.tagging.span_f1 import span_scores, spans, token_accuracy


def test_spans_of_bio_and_iobes() -> None:
    assert spans(["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]) == {("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 4)}
    assert spans(["S-PER", "B-LOC", "I-LOC", "E-LOC", "O"]) == {("PER", 0, 0), ("LOC", 1, 3)}
    # malformed input read as the CoNLL script reads it: an I- of another type opens a span
    assert spans(["O", "I-PER", "I-LOC"]) == {("PER", 1, 1), ("LOC", 2, 2)}
    assert spans(["O", "O"]) == set()


def test_hand_counted_precision_recall_f1() -> None:
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "O"]]
    predicted = [["B-PER", "I-PER", "O", "O"], ["B-ORG", "B-PER", "O"]]
    # gold spans: PER(0-1), LOC(3), ORG(0) = 3; predicted: PER(0-1), ORG(0), PER(1) = 3; correct: 2
    scores = span_scores(gold, predicted)
    assert scores["precision"] == pytest.approx(2 / 3) and scores["recall"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(2 / 3)
    # a span with the right type but a wrong end counts as wrong
    assert span_scores([["B-PER", "I-PER"]], [["B-PER", "O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert span_scores([["O"]], [["O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert span_scores([["B-A", "O"]], [["B-A", "B-B"]]) == pytest.approx(
        {"precision": 0.5, "recall": 1.0, "f1": 2 / 3}
    )
    assert token_accuracy(gold, predicted) == pytest.approx(5 / 7)


def test_mismatched_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
        span_scores([["O", "O"]], [["O"]])

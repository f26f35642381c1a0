"""Masked-LM evaluation: loss, perplexity and top-1 accuracy over every selected position of a split."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from embreg.errors import EmbregError
from embreg.models.output import ModelOutput
from embreg.tasks.mlm.evaluation import MaskedLMEvaluator


class FixedGuess(nn.Module):
    """Scores id ``guess`` (a per-text tensor) highest at every selected position of its text."""

    def forward(self, batch: dict[str, torch.Tensor]) -> ModelOutput:
        selected = batch["labels"] != -100
        rows = batch["input_ids"][:, 0].repeat_interleave(selected.sum(dim=1))  # the text's guess in column 0
        logits = torch.zeros(rows.numel(), 6)
        logits[torch.arange(rows.numel()), rows] = 3.0
        return ModelOutput(logits)


def test_accuracy_is_the_share_of_selected_positions_predicted_right_across_batches() -> None:
    labels = torch.tensor([[2, -100, 2, 3], [-100, 5, -100, -100], [1, 1, 4, -100]])
    guesses = torch.tensor([[2], [5], [1]])  # right on 2 of 3, 1 of 1, 2 of 3 positions
    data = {"valid": {"input_ids": guesses.expand(3, 4).clone(), "attention_mask": torch.ones(3, 4, dtype=torch.long),
                      "labels": labels}}  # fmt: skip
    for batch_size in (1, 2, 3):  # a mean over positions, not of batch means
        scores = MaskedLMEvaluator(data, batch_size=batch_size)(FixedGuess(), "valid")
        assert scores["accuracy"] == pytest.approx(5 / 7)
        right, wrong = math.log(math.exp(3) + 5) - 3, math.log(math.exp(3) + 5)
        assert scores["loss"] == pytest.approx((5 * right + 2 * wrong) / 7)
        assert scores["ppl"] == pytest.approx(math.exp(scores["loss"]))


def test_a_split_without_a_selected_position_is_refused() -> None:
    data = {"test": {"input_ids": torch.ones(1, 2, dtype=torch.long), "attention_mask": torch.ones(1, 2),
                     "labels": torch.full((1, 2), -100)}}  # fmt: skip
    with pytest.raises(EmbregError, match="split 'test' has no masked position"):
        MaskedLMEvaluator(data)

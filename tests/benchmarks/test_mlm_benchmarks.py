"""The pieces of the masked-LM benchmarks that decide their readings: packing, CKA, weight change, the milestone."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from tests.helpers.scripts import load_script  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_packing_lays_every_word_piece_end_to_end_in_full_rows() -> None:
    batching = load_script(BENCHMARKS / "mlm_batching.py")
    ids = torch.tensor([[101, 5, 6, 102, 0], [101, 7, 102, 0, 0], [101, 8, 9, 10, 102]])
    rows = batching.packed_rows(ids, (ids != 0).long(), 4)
    assert rows["input_ids"].tolist() == [[101, 5, 6, 102], [101, 7, 102, 101], [8, 9, 10, 102]]
    assert rows["attention_mask"].all()


def test_linear_cka_is_one_for_a_rotation_and_low_for_unrelated_vectors() -> None:
    drift = load_script(BENCHMARKS / "mlm_encoder_drift.py")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 8, generator=g, dtype=torch.float64)
    rotation = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))[0]
    assert drift.linear_cka(x, 2 * x @ rotation + 1) == pytest.approx(1.0)
    assert drift.linear_cka(x, torch.randn(400, 8, generator=g, dtype=torch.float64)) < 0.1


def test_relative_change_reads_only_the_named_part() -> None:
    drift = load_script(BENCHMARKS / "mlm_encoder_drift.py")
    before = {"a.w": torch.ones(4), "b.w": torch.ones(4), "steps": torch.tensor([3])}
    after = {"a.w": torch.ones(4), "b.w": torch.full((4,), 1.5), "steps": torch.tensor([9])}
    assert drift.relative_change(after, before, "a.") == 0.0
    assert drift.relative_change(after, before, "b.") == pytest.approx(0.5)
    assert drift.relative_change(after, before) == pytest.approx(0.5 / 2**0.5)  # integer tensors are left out


def test_fill_mask_is_sensible_from_the_first_point_that_stays_above_half() -> None:
    curve = load_script(BENCHMARKS / "mlm_fill_mask_curve.py")
    record = {"sentences": [["s", ["w"]]] * 4, "points": [
        {"step": s, "top1_fits": f} for s, f in ((0, 0), (10, 2), (25, 1), (50, 2), (100, 3))]}  # fmt: skip
    assert curve.first_sensible(record)["step"] == 50
    record["points"][-1]["top1_fits"] = 1
    assert curve.first_sensible(record) is None

"""The LSTM under CPU bfloat16 autocast: oneDNN's bf16 kernel where the CPU has one, float32 where it has not."""

from __future__ import annotations

import pytest
import torch

from embreg.models import lstm_precision
from embreg.models.lstm_precision import cpu_bf16_lstm_supported, run_lstm


def _lstm_and_input() -> tuple[torch.nn.LSTM, torch.Tensor]:
    torch.manual_seed(0)
    return torch.nn.LSTM(6, 5, batch_first=True), torch.randn(3, 4, 6)


def test_without_autocast_it_is_the_plain_call() -> None:
    lstm, x = _lstm_and_input()
    assert torch.equal(run_lstm(lstm, x, None)[0], lstm(x)[0])


def test_the_fallback_runs_in_float32_and_equals_the_float32_lstm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lstm_precision, "cpu_bf16_lstm_supported", lambda: False)
    lstm, x = _lstm_and_input()
    state = (torch.zeros(1, 3, 5, dtype=torch.bfloat16), torch.zeros(1, 3, 5, dtype=torch.bfloat16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, (h, c) = run_lstm(lstm, x.bfloat16(), state)
    expected, _ = lstm(x.bfloat16().float())
    assert out.dtype == h.dtype == c.dtype == torch.float32
    assert torch.equal(out, expected)


def test_under_bf16_autocast_the_output_is_close_to_float32_on_any_cpu() -> None:
    lstm, x = _lstm_and_input()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = run_lstm(lstm, x, None)
    assert torch.allclose(out.float(), lstm(x)[0], atol=0.05)
    assert out.dtype == (torch.bfloat16 if cpu_bf16_lstm_supported() else torch.float32)

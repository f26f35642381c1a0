"""How CUDA ids choose SSE-SE's backend (embreg.sse._cuda_sampler.cuda_sampler), checked without a GPU: ids are
stood in for by an object whose device type is ``cuda``, and Triton's presence is patched."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest
import torch

from embreg.errors import EmbregError
from embreg.sse import _cuda_sampler as sampler

CUDA_IDS = SimpleNamespace(device=torch.device("cuda", 0))
KERNEL = SimpleNamespace(name="kernel")


@pytest.fixture(autouse=True)
def no_recorded_use():
    """The backends these stand-in ids took are not left in the process's backend record."""
    used = set(sampler._USED)
    yield
    sampler._USED.clear()
    sampler._USED.update(used)


@pytest.fixture
def no_cache():
    sampler._triton.cache_clear()
    yield
    sampler._triton.cache_clear()


@pytest.mark.parametrize(
    ("mode", "triton", "expected"), [("auto", KERNEL, KERNEL), ("auto", None, None), ("off", KERNEL, None)]
)
def test_the_mode_and_triton_choose_the_backend(monkeypatch, mode, triton, expected) -> None:
    monkeypatch.setenv("EMBREG_SSE_KERNEL", mode)
    monkeypatch.setattr(sampler, "_triton", lambda: triton)
    assert sampler.cuda_sampler(CUDA_IDS) is expected  # type: ignore[arg-type]


def test_on_without_triton_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setenv("EMBREG_SSE_KERNEL", "on")
    monkeypatch.setattr(sampler, "_triton", lambda: None)
    with pytest.raises(EmbregError, match="EMBREG_SSE_KERNEL=on but the CUDA SSE sampler needs Triton"):
        sampler.cuda_sampler(CUDA_IDS)  # type: ignore[arg-type]


def test_a_missing_triton_is_silent_and_a_broken_one_warns_once(monkeypatch, no_cache, recwarn) -> None:
    def missing():
        raise ImportError("No module named 'triton'")

    monkeypatch.setattr(sampler, "_compile", missing)
    assert sampler._triton() is None and not recwarn.list
    sampler._triton.cache_clear()

    def broken():
        raise RuntimeError("triton does not fit this torch")

    monkeypatch.setattr(sampler, "_compile", broken)
    with pytest.warns(RuntimeWarning, match="cannot use Triton.*does not fit"):
        assert sampler._triton() is None
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        assert sampler._triton() is None
    assert not again  # tried once per process: no second warning

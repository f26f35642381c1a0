"""Test helpers for the library's C++ kernels (embreg._native): run a test on a chosen backend."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from embreg.errors import EmbregError


def select_backend(backend: str, monkeypatch: pytest.MonkeyPatch, env_var: str, load: Callable[[], object]) -> str:
    """Sets ``env_var`` for ``backend`` (``cpp`` or ``torch``) and returns it; skips ``cpp`` (with the build error as
    reason) on a machine that cannot compile the kernel, where the library falls back to the tensor ops."""
    if backend == "torch":
        monkeypatch.setenv(env_var, "off")
        return "torch"
    require_kernel(monkeypatch, env_var, load)
    return "cpp"


def require_kernel(monkeypatch: pytest.MonkeyPatch, env_var: str, load: Callable[[], object]) -> object:
    """The compiled kernel with ``env_var=on``; skips the test where it cannot be built."""
    monkeypatch.setenv(env_var, "on")
    try:
        return load()
    except EmbregError as error:  # pragma: no cover - depends on the machine's compiler
        pytest.skip(f"kernel unavailable ({env_var}): {error}")

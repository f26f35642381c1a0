"""Fixtures for the data tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh EMBREG_HOME for one test."""
    path = tmp_path / "embreg-home"
    monkeypatch.setenv("EMBREG_HOME", str(path))
    return path

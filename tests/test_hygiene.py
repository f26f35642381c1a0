"""Lint, formatting and types are part of the test command: ruff (lint + format) and mypy, configured in
pyproject.toml, pass on the whole tree."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ["src", "tests", "benchmarks"]


def _ruff() -> list[str]:
    pytest.importorskip("ruff", reason="ruff is in the [test] extra")
    executable = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    return [executable] if executable else [sys.executable, "-m", "ruff"]


def _run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_lint_passes():
    result = _run([*_ruff(), "check", *TREES])
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_applied():
    result = _run([*_ruff(), "format", "--check", *TREES])
    assert result.returncode == 0, "run `ruff format src tests benchmarks`:\n" + result.stdout + result.stderr


def test_mypy_passes_on_the_library():
    pytest.importorskip("mypy", reason="mypy is in the [test] extra")
    result = _run([sys.executable, "-m", "mypy"])  # files and options: [tool.mypy] in pyproject.toml
    assert result.returncode == 0, result.stdout + result.stderr

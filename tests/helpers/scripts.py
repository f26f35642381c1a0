"""``load_script(path)``: a script of ``benchmarks/`` (no package) imported by its path, as a module."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """The module of the Python file ``path``, executed once (``name`` defaults to ``benchmark_<stem>``)."""
    spec = importlib.util.spec_from_file_location(name or f"benchmark_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""Without TorchRec, importing the integration fails with an ImportError that names the set-up, and embreg itself
still imports. Runs in every environment: TorchRec is hidden from the import system for the test."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

MODULE = "embreg.integrations.torchrec_md"


def test_missing_torchrec_gives_an_import_error_naming_the_setup(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchrec", None)  # `import torchrec` now raises ImportError
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    with pytest.raises(ImportError, match=r"docs/torchrec\.md") as info:
        importlib.import_module(MODULE)
    message = str(info.value)
    assert "pip install --no-deps torchrec==1.9.2" in message and "fbgemm-gpu-cpu==1.9.0" in message
    monkeypatch.delitem(sys.modules, MODULE, raising=False)


def test_embreg_imports_without_torchrec_and_without_loading_the_integration():
    code = (
        "import sys; sys.modules['torchrec'] = None\n"
        "import embreg, embreg.embeddings, embreg.integrations\n"
        f"assert {MODULE!r} not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr

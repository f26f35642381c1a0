"""Every script in ``benchmarks/`` imports and answers ``--help`` (its argument parser is intact).

The scripts are loaded by path (``benchmarks`` is no package); those that need an optional dependency are skipped
where it is missing.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted([*BENCHMARKS.glob("*.py"), *BENCHMARKS.glob("recbole_peer/*.py")])
OPTIONAL = {  # script -> optional dependencies it imports or needs to build its parser
    "surprise_baseline": ("surprise",),
    "finetune_cost": ("transformers",),
    "finetune_cost_profile": ("transformers",),
    "finetune_noise_attenuation": ("transformers",),
    "mlm_step_cost": ("transformers",),
    "mlm_batching": ("transformers",),
    "mlm_fill_mask_curve": ("transformers",),
    "mlm_encoder_drift": ("transformers",),
}


def test_there_are_scripts():
    assert SCRIPTS, f"no scripts in {BENCHMARKS}"


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_script_imports_and_answers_help(
    path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for dependency in OPTIONAL.get(path.stem, ()):
        pytest.importorskip(dependency)
    module = load_script(path)
    main = getattr(module, "main", None)
    assert callable(main), f"{path.name} has no main()"
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"]) if inspect.signature(main).parameters else main()
    assert exit_info.value.code in (0, None)
    assert "usage:" in capsys.readouterr().out

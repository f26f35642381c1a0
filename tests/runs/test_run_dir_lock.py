"""One run writes into a run directory at a time: a second one is refused clearly and writes nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from embreg.errors import EmbregError, RunDirectoryLockedError
from embreg.recipes import load_recipe
from embreg.recipes import run as run_module
from embreg.recipes.run import run_seeds, run_single
from embreg.runs.run_dir import LOCK, RunDirectory

QUICK = ["data.max_rows=2000", "train.epochs=1", "train.progress=false", "train.threads=1"]


def _listing(path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def test_a_second_run_into_a_locked_directory_is_refused_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    recipe = load_recipe("mf", QUICK)
    with RunDirectory(out).lock():
        with pytest.raises(RunDirectoryLockedError, match=f"run directory {out} is locked: another run is writing"):
            run_single(recipe, out)
        with pytest.raises(RunDirectoryLockedError):
            run_seeds(recipe, out, 2)
        assert _listing(out) == [LOCK]
    assert not out.exists()  # released, and the empty directory the lock made is gone
    run_single(recipe, out)  # free again
    assert "metrics.json" in _listing(out) and LOCK not in _listing(out)
    assert issubclass(RunDirectoryLockedError, EmbregError)


def test_the_lock_is_held_during_the_run_and_released_when_it_fails(tmp_path, monkeypatch):
    out = tmp_path / "run"
    seen = []

    def failing_build(recipe, prepared=None):
        seen.append((out / LOCK).exists())
        with pytest.raises(RunDirectoryLockedError):
            with RunDirectory(out).lock():
                pass
        raise RuntimeError("boom")

    monkeypatch.setattr(run_module, "build_run", failing_build)
    with pytest.raises(RuntimeError, match="boom"):
        run_single(load_recipe("mf", QUICK), out)
    assert seen == [True]
    assert not (out / LOCK).exists()
    with RunDirectory(out).lock():
        pass


def test_each_seed_directory_is_locked_as_well(tmp_path):
    out = tmp_path / "multi"
    with RunDirectory(out).seed(0).lock():
        with pytest.raises(RunDirectoryLockedError, match="seed-0 is locked"):
            run_seeds(load_recipe("mf", QUICK), out, 1)
    assert not (out / LOCK).exists()  # the series' own lock is released after the refusal


def test_a_lock_held_by_another_process_is_seen_and_dies_with_it(tmp_path):
    out = tmp_path / "run"
    holder = textwrap.dedent(f"""
        import sys
        from embreg.runs.run_dir import RunDirectory
        with RunDirectory({str(out)!r}).lock():
            print("locked", flush=True)
            sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirectoryLockedError, match=f"another run is writing there \\(pid {proc.pid}\\)"):
            with RunDirectory(out).lock():
                pass
        with pytest.raises(RunDirectoryLockedError):
            run_single(load_recipe("mf", QUICK), out)
        assert _listing(out) == [LOCK]
    finally:
        proc.kill()  # a crash: the lock file stays behind, the lock does not
        proc.communicate(timeout=30)
    assert (out / LOCK).exists()
    with RunDirectory(out).lock():
        pass
    assert not (out / LOCK).exists()


def test_a_run_that_fails_before_writing_leaves_no_directory(tmp_path) -> None:
    from embreg.errors import DataError
    from embreg.recipes import load_recipe
    from embreg.recipes.run import run_single

    out = tmp_path / "never"
    recipe = load_recipe("mf", [f"data.path={tmp_path / 'missing.csv'}", "train.progress=false"])
    with pytest.raises(DataError):
        run_single(recipe, out)
    assert not out.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    with pytest.raises(DataError):
        run_single(recipe, kept)
    assert kept.is_dir() and list(kept.iterdir()) == []  # a directory the user made stays

"""The demo's output folder belongs to one demo: a second demo there is refused unless --overwrite."""

from __future__ import annotations

import pytest

from embreg.cli import main
from embreg.demo import _claim_demo_dir
from embreg.runs.run_dir import RunDirectoryInUseError


def test_a_second_demo_into_the_same_folder_is_refused_before_training(tmp_path, capsys):
    (tmp_path / "demo.md").write_text("earlier demo\n")
    (tmp_path / "mf").mkdir()
    with pytest.raises(RunDirectoryInUseError, match=r"earlier demo \(demo.md, mf\).*--overwrite"):
        _claim_demo_dir(tmp_path, overwrite=False)
    assert main(["demo", "--seeds", "1", "--out", str(tmp_path)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (tmp_path / "demo.md").read_text() == "earlier demo\n"


def test_overwrite_deletes_only_the_demos_own_entries(tmp_path):
    (tmp_path / "demo.md").write_text("earlier demo\n")
    (tmp_path / "bpr" / "seed-0").mkdir(parents=True)
    (tmp_path / "notes.txt").write_text("mine\n")
    _claim_demo_dir(tmp_path, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("command", ["demo", "sweep"])
def test_an_out_at_a_file_or_below_one_is_one_line_before_anything_runs(tmp_path, capfd, command):
    pytest.importorskip("optuna")
    (tmp_path / "notes.txt").write_text("mine\n")
    args = ["demo", "--seeds", "1"] if command == "demo" else ["sweep", "mf", "--trials", "1"]
    for out, says in ((tmp_path / "notes.txt", "is an existing file"), (tmp_path / "notes.txt" / "x", "lies below")):
        assert main([*args, "--out", str(out)]) == 2
        captured = capfd.readouterr()
        assert captured.out == "" and captured.err.startswith(f"embreg: error: {command} directory")
        assert says in captured.err and len(captured.err.splitlines()) == 1
    assert (tmp_path / "notes.txt").read_text() == "mine\n"

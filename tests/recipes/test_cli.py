"""The command line: parsing, listing and error reporting (no training)."""

import json

import pytest

from embreg.cli import main


def test_list_shows_recipes_datasets_and_techniques(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for word in ("mf-sse-graph", "bpr-sse-se", "ml-100k", "SSEGraph"):
        assert word in out


def test_bad_override_is_a_clean_error(capsys):
    assert main(["run", "mf", "--set", "train.lrr=0.1", "--out", "unused"]) == 2
    assert "did you mean 'train.lr'" in capsys.readouterr().err


def test_compare_prints_table(tmp_path, capsys):
    for name, values in (("a", [0.9, 0.91, 0.92]), ("b", [0.88, 0.885, 0.89])):
        run = tmp_path / name
        run.mkdir()
        summary = {"test_rmse": {"mean": sum(values) / 3, "std": 0.01, "median": values[1], "min": min(values),
                                 "max": max(values), "values": values}}
        (run / "summary.json").write_text(json.dumps(summary))
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "test_rmse" in out and "0.8850" in out


def test_unknown_command_exits_nonzero():
    with pytest.raises(SystemExit):
        main(["frobnicate"])

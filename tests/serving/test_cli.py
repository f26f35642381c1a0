"""embreg predict | recommend | score | export: CSV files on original ids, one-line summaries, clear errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from embreg.cli import main


def test_predict_writes_the_csv_and_counts_unknown_ids(trained, tmp_path: Path, capsys) -> None:
    rows = tmp_path / "pairs.csv"
    rows.write_text("user,item\n007,i03\nghost,i03\n")
    out = tmp_path / "out" / "predictions.csv"
    assert main(["predict", str(trained("rating")), "--input", str(rows), "--out", str(out)]) == 0
    table = pd.read_csv(out, dtype={"user": str})
    assert table.columns.tolist() == ["user", "item", "rating", "status"]
    assert table["user"].tolist() == ["007", "ghost"] and table["status"].tolist() == ["ok", "mean"]
    assert "2 rows: 1 predicted, 1 with ids unseen in training (1 given the training mean" in capsys.readouterr().out
    args = ["predict", str(trained("rating")), "--input", str(rows), "--out", str(out), "--overwrite"]
    assert main([*args, "--unknown", "error"]) == 2
    assert "embreg: error: 1 of 2 input rows hold ids never seen" in capsys.readouterr().err


def test_recommend_all_users_writes_user_item_rank_score(trained, tmp_path: Path, capsys) -> None:
    out = tmp_path / "top.csv"
    assert main(["recommend", str(trained("ranking")), "--all", "--k", "3", "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert table.columns.tolist() == ["user", "item", "rank", "score"]
    assert set(table["rank"]) == {1, 2, 3}
    assert "top-3 items" in capsys.readouterr().out
    assert main(["recommend", str(trained("ranking")), "--out", str(out)]) == 2
    assert "--users U1,U2,... or --all" in capsys.readouterr().err


def test_score_prints_the_total_perplexity(trained, tmp_path: Path, capsys) -> None:
    text = tmp_path / "text.txt"
    text.write_text("the cat sat\nthe dog ran\n")
    assert main(["score", str(trained("lm")), "--input", str(text), "--out", str(tmp_path / "ppl.csv")]) == 0
    assert "2 lines, 8 tokens (0 unknown): perplexity" in capsys.readouterr().out
    assert pd.read_csv(tmp_path / "ppl.csv")["line"].tolist() == ["1", "2", "total"]


def test_missing_checkpoint_exits_2_naming_the_file(trained, tmp_path: Path, capsys) -> None:
    copy = tmp_path / "run"
    shutil.copytree(trained("rating"), copy)
    (copy / "last.safetensors").unlink()
    args = ["export", str(copy), "--checkpoint", "last", "--out", str(tmp_path / "x")]
    assert main(args) == 2
    assert "last.safetensors" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["predict", "recommend", "score", "export"])
def test_every_serving_command_is_listed(command: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "--checkpoint" in capsys.readouterr().out

"""Text predict: every input column kept, blank texts marked, a summary of texts, no Hugging Face progress bars, and
a model served from the run's records without preparing its training data again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from embreg.cli import main
from embreg.errors import DataError
from embreg.serving import load


def test_every_input_column_is_kept_in_order_and_the_predictions_added(trained, tmp_path: Path, capsys) -> None:
    rows = tmp_path / "reviews.csv"
    rows.write_text('id,text,label,note\n007,good film,pos,a\n2,"bad, bad film",neg,b\n010,the dress,pos,\n')
    out = tmp_path / "predicted.csv"
    assert main(["predict", str(trained("classification")), "--input", str(rows), "--out", str(out)]) == 0
    table = pd.read_csv(out, dtype=str, keep_default_na=False)
    # the input's own `label` stays; the prediction takes the free name predicted_label
    assert table.columns.tolist() == ["id", "text", "label", "note", "predicted_label", "probability", "status"]
    assert table["id"].tolist() == ["007", "2", "010"] and table["label"].tolist() == ["pos", "neg", "pos"]
    alone = load(trained("classification")).predict(["good film", "bad, bad film", "the dress"]).table
    assert table["predicted_label"].tolist() == alone["label"].tolist()
    np.testing.assert_allclose(table["probability"].astype(float), alone["probability"].astype(float), rtol=1e-6)
    assert "3 texts: 3 predicted, 0 empty; 0 cut to data.max_length=48 word pieces" in capsys.readouterr().out


def test_a_table_keeps_its_columns_from_python_too(trained) -> None:
    frame = pd.DataFrame({"id": ["a", "b"], "text": ["good film", "bad film"], "score": [1.5, 2.5]})
    table = load(trained("regression")).predict(frame).table
    assert table.columns.tolist() == ["id", "text", "score", "value", "status"]
    assert table["id"].tolist() == ["a", "b"] and table["score"].tolist() == [1.5, 2.5]


def test_blank_texts_keep_their_row_and_get_no_prediction(trained, tmp_path: Path) -> None:
    run = load(trained("classification"))
    lines = tmp_path / "texts.txt"
    lines.write_text("good film\n\n   \nbad film\n")
    prediction = run.predict(lines)
    assert prediction.table["text"].tolist() == ["good film", "", "   ", "bad film"]
    assert prediction.table["status"].tolist() == ["ok", "empty", "empty", "ok"]
    assert prediction.table["label"].isna().tolist() == [False, True, True, False]
    assert prediction.summary["empty"] == 2 and prediction.summary["predicted"] == 2
    missing = pd.DataFrame({"text": ["good film", None]})
    assert run.predict(missing).table["status"].tolist() == ["ok", "empty"]


def test_lines_of_a_text_file_end_at_newline_only(trained, tmp_path: Path) -> None:
    lines = tmp_path / "texts.txt"
    lines.write_text("good\u2028film\r\nbad\x0cfilm\x1c\nthe\x85dress\u2029\n", encoding="utf-8")
    table = load(trained("classification")).predict(lines).table
    assert table["text"].tolist() == ["good\u2028film", "bad\x0cfilm\x1c", "the\x85dress\u2029"]


def test_cut_texts_and_unknown_word_pieces_are_counted(trained) -> None:
    run = load(trained("classification"))
    long = " ".join(["good film"] * 40)  # 80 word pieces, cut to data.max_length = 48
    prediction = run.predict([long, "good zebra film okapi", "bad film"])
    assert prediction.summary["cut"] == 1 and prediction.summary["unknown_pieces"] == 2
    assert prediction.summary_line() == (
        "3 texts: 3 predicted, 0 empty; 1 cut to data.max_length=48 word pieces, 2 unknown word pieces ([UNK])"
    )


@pytest.mark.parametrize("name", ["texts.txt", "rows.csv"])
def test_a_file_that_is_not_utf8_is_one_error_naming_its_line(trained, tmp_path: Path, capsys, name: str) -> None:
    file = tmp_path / name
    file.write_bytes(b"text\ngood film\nsch\xf6n\n")
    code = main(["predict", str(trained("classification")), "--input", str(file), "--out", str(tmp_path / "o.csv")])
    err = capsys.readouterr().err
    assert code == 2 and f"{name}: line 3 is not UTF-8 text (byte 0xf6)" in err and len(err.splitlines()) == 1


def test_hugging_face_prints_no_loading_bars(trained, tmp_path: Path, capfd) -> None:
    from transformers.utils import logging

    lines = tmp_path / "texts.txt"
    lines.write_text("good film\n")
    capfd.readouterr()
    assert (
        main(["predict", str(trained("classification")), "--input", str(lines), "--out", str(tmp_path / "o.csv")]) == 0
    )
    out, err = capfd.readouterr()
    assert "Loading weights" not in out + err and "LOAD REPORT" not in out + err
    assert err == "" and out.startswith("1 texts: 1 predicted")
    assert logging.is_progress_bar_enabled()  # the user's own setting is left as it was


def test_a_text_run_is_served_without_preparing_its_data(trained, monkeypatch) -> None:
    from embreg.tasks.text.task import TextClassificationTask

    calls = []
    prepare = TextClassificationTask.prepare
    monkeypatch.setattr(
        TextClassificationTask, "prepare", lambda self, recipe: calls.append(1) or prepare(self, recipe)
    )
    run = load(trained("classification"))
    assert len(run.predict(["good film", "bad film"]).table) == 2 and calls == []
    assert len(run.prepared.tensors["test"]["input_ids"]) > 0 and calls == [1]  # prepared (and checked) when asked
    run.evaluator(run.model, "test")
    assert calls == [1]


def test_a_run_whose_tokenizer_changed_is_refused(trained, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(trained("classification"), copy)
    record = json.loads((copy / "serving.json").read_text())
    (copy / "serving.json").write_text(json.dumps(record | {"vocab_size": record["vocab_size"] + 1}))
    with pytest.raises(DataError, match="is not the one this run was trained with"):
        load(copy)
    (copy / "serving.json").unlink()  # a run without the record is served by preparing its data, as before
    assert load(copy).predict(["good film"]).table["status"].tolist() == ["ok"]


def test_a_non_finite_text_prediction_is_never_ok(trained) -> None:
    run = load(trained("regression"))
    with torch.no_grad():
        for parameter in run.model.parameters():
            parameter.fill_(float("nan"))
    frame = pd.DataFrame({"text": ["good film", "", "bad film"], "status": ["x", "y", "z"]})
    prediction = run.predict(frame)
    # the input's own `status` column stays; the prediction's status takes the free name
    assert prediction.table["status"].tolist() == ["x", "y", "z"]
    assert prediction.table["predicted_status"].tolist() == ["non-finite", "empty", "non-finite"]
    assert prediction.summary["non_finite"] == 2
    assert "2 predictions are not finite" in prediction.summary_line()

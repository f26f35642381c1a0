"""`embreg translate` and `embreg score`: one output per input line (lines end at \\n only), what was cut or unknown
said on stderr, and bad input (non-UTF-8 files, non-finite --alpha/--beta) one error line with exit status 2."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from embreg.cli import main
from embreg.serving import load

INNER = "\u2028\u2029\x0c\x1c\x85"


def test_translate_counts_cut_lines_and_unknown_pieces(trained, tmp_path: Path, capsys) -> None:
    run_dir = trained("translation")
    long = " ".join(f"w{i}" for i in range(12))  # 12 words: more than data.max_tokens = 8 pieces
    translations = load(run_dir).translate([long, "w1 ZZ", "w2", ""])
    assert len(translations) == 4 and translations[3] == ""
    assert (translations.cut, translations.unknown, translations.max_tokens) == (1, 2, 8)  # Z is no training piece
    lines = tmp_path / "in.txt"
    lines.write_text(f"{long}\nw1 ZZ\nw2\n\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["translate", str(run_dir), "--input", str(lines)]) == 0
    out, err = capsys.readouterr()
    assert out.split("\n")[:4] == list(translations)
    assert err == "4 lines translated; 1 cut to data.max_tokens=8 source pieces, 2 unknown source pieces (<unk>)\n"


def test_translate_gives_one_output_line_per_input_line(trained, tmp_path: Path, capsys) -> None:
    lines = tmp_path / "in.txt"
    lines.write_text(f"w1{INNER}w2\r\nw3\x0b\nw4\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["translate", str(trained("translation")), "--input", str(lines), "--beam", "1"]) == 0
    assert len(capsys.readouterr().out.split("\n")) == 3 + 1  # three lines, each ended by \n


def test_translate_and_score_name_the_file_and_line_that_is_not_utf8(trained, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("w1\nw2 caf\xe9\n".encode("latin-1"))
    for command in (["translate", str(trained("translation"))], ["score", str(trained("lm"))]):
        assert main([*command, "--input", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err == f"embreg: error: {bad}: line 2 is not UTF-8 text (byte 0xe9); save the file as UTF-8\n"


def test_translate_reads_stdin_bytes_as_utf8(trained, monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"w1\n\xff\n")))
    assert main(["translate", str(trained("translation"))]) == 2
    assert "<stdin>: line 2 is not UTF-8 text" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value"), [("--alpha", "nan"), ("--alpha", "inf"), ("--beta", "-inf"), ("--beta", "-1")]
)
def test_non_finite_or_negative_decoding_weights_are_refused(trained, capsys, flag: str, value: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["translate", str(trained("translation")), f"{flag}={value}"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"{value!r} must be a finite number >= 0" in err.splitlines()[-1]


def test_translate_refuses_non_finite_weights_from_python_too(trained) -> None:
    from embreg.errors import ConfigError

    with pytest.raises(ConfigError, match="alpha and beta finite numbers >= 0"):
        load(trained("translation")).translate(["w1"], alpha=float("nan"))


def test_score_keeps_one_row_per_input_line(trained, tmp_path: Path, capsys) -> None:
    text = tmp_path / "text.txt"
    text.write_text(f"the cat{INNER}sat\r\nthe dog ran\nthe\x0cmat\n", encoding="utf-8")
    out = tmp_path / "scores.csv"
    assert main(["score", str(trained("lm")), "--input", str(text), "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("3 lines,")
    assert pd.read_csv(out, dtype={"line": str})["line"].tolist() == ["1", "2", "3", "total"]


def test_score_reads_every_token_of_a_long_line(trained) -> None:
    words = " ".join(["the cat sat on a mat"] * 20)  # 120 words: score cuts nothing
    table = load(trained("lm")).score([words])
    assert table.loc[0, "tokens"] == 121  # every word and the closing <eos>


@pytest.mark.parametrize(("command", "says"), [("translate", "is cut to them"), ("score", "nothing is cut")])
def test_the_help_says_what_is_cut(command: str, says: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert says in " ".join(capsys.readouterr().out.split())

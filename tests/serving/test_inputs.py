"""The shared readers of what a user hands a trained run: item lists and text lines (embreg.data.files.inputs)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from embreg.data.files.inputs import decode_lines, item_list, read_lines, read_stdin_lines, split_lines
from embreg.errors import ConfigError, DataError

# every character str.splitlines() breaks at besides \n and \r\n, inside a line
INNER_BREAKS = ["\u2028", "\u2029", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\x0b"]


@pytest.mark.parametrize("inner", INNER_BREAKS)
def test_lines_end_at_newline_only(inner: str) -> None:
    text = f"one{inner}still one\r\ntwo\nthree{inner}\n"
    assert split_lines(text) == [f"one{inner}still one", "two", f"three{inner}"]
    assert len(text.splitlines()) > 3  # what str.splitlines would have made of three lines


def test_a_final_line_break_ends_the_last_line_and_blank_lines_stay() -> None:
    assert split_lines("a\n\nb") == ["a", "", "b"]
    assert split_lines("a\r\n") == ["a"]
    assert split_lines("") == [] and split_lines("\n") == [""]


def test_a_file_is_read_as_utf8_lines_without_its_byte_order_mark(tmp_path: Path) -> None:
    file = tmp_path / "in.txt"
    file.write_bytes("\ufeffDer Vater\u2028liest\r\nzwei\x0c\n".encode())
    assert read_lines(file) == ["Der Vater\u2028liest", "zwei\x0c"]


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_bytes_that_are_not_utf8_name_the_file_and_the_line(tmp_path: Path, bom: bytes) -> None:
    file = tmp_path / "latin1.txt"
    file.write_bytes(bom + "one\ntwo\nGr\xfc\xdfe\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1.txt: line 3 is not UTF-8 text \(byte 0xfc\)"):
        read_lines(file)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="missing.txt' does not exist"):
        read_lines(tmp_path / "missing.txt")


def test_stdin_is_read_like_a_file(monkeypatch) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("a\u2028b\nc\n".encode())))
    assert read_stdin_lines() == ["a\u2028b", "c"]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"ok\n\xff\n")))
    with pytest.raises(DataError, match="<stdin>: line 2 is not UTF-8"):
        read_stdin_lines()
    monkeypatch.setattr("sys.stdin", io.StringIO("x\x0cy\n"))
    assert read_stdin_lines() == ["x\x0cy"]


def test_decode_lines_keeps_each_line_whole() -> None:
    assert decode_lines("α\x85β\nγ".encode(), "f") == ["α\x85β", "γ"]


@pytest.mark.parametrize(
    ("value", "items"),
    [(["a b"], ["a b"]), (("a", "b"), ["a", "b"]), (np.array(["x", "y"]), ["x", "y"]), (iter(["z"]), ["z"])],
)
def test_item_lists_take_any_iterable_of_items(value, items: list) -> None:
    assert item_list(value, argument="lines", call="translate") == items


@pytest.mark.parametrize(
    ("value", "shown"),
    [("Der Vater liest", "['Der Vater liest']"), (b"abc", "['abc']"), (196, "[196]"), (np.str_("u1"), "['u1']")],
)
def test_a_single_value_is_refused_naming_the_list_that_works(value, shown: str) -> None:
    with pytest.raises(ConfigError, match=r"translate\(lines=...\) takes a list, not a single") as error:
        item_list(value, argument="lines", call="translate")
    assert str(error.value).endswith(f"pass {shown}") and "\n" not in str(error.value)

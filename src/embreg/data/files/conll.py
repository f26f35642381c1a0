"""Reading CoNLL-format sequence-labelling files: one token per line, a blank line between sentences.

Each non-blank line holds whitespace-separated columns: the token first, optional middle columns (POS, chunk, ...)
and the tag, by default in the last column (``tag_column``: any column index but the token's, negative counting
from the end). ``-DOCSTART-`` lines (CoNLL-2003's document separators) are skipped. Every line of a file must have
the same number of columns. A malformed line is a :class:`~embreg.errors.DataError` naming the file and the line.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "train.txt"
    ...     _ = path.write_text("-DOCSTART- -X- O\\n\\nJohn NNP B-PER\\nruns VBZ O\\n\\nParis NNP B-LOC\\n")
    ...     sentences = read_conll(path)
    >>> [(s.tokens, s.tags, s.lines) for s in sentences]
    [(['John', 'runs'], ['B-PER', 'O'], [3, 4]), (['Paris'], ['B-LOC'], [6])]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from embreg.errors import DataError

__all__ = ["TaggedSentence", "read_conll", "DOCSTART"]

DOCSTART = "-DOCSTART-"


@dataclass
class TaggedSentence:
    """One sentence: its tokens, their tags, and where it came from (file and 1-based line of every token)."""

    tokens: list[str]
    tags: list[str]
    source: str = ""
    lines: list[int] | None = None

    def where(self, position: int = 0) -> str:
        """``file:line`` of the token at ``position`` (or of the sentence when lines are unknown)."""
        if self.lines is None:
            return self.source or "<memory>"
        return f"{self.source}:{self.lines[min(position, len(self.lines) - 1)]}"


def read_conll(path: str | Path, *, tag_column: int = -1) -> list[TaggedSentence]:
    """The sentences of a CoNLL-format file (module docstring).

    Args:
        path: the file (UTF-8).
        tag_column: the column holding the tag (``-1``: the last); it may not be the token's column 0.

    Returns:
        The sentences in file order.

    Raises:
        DataError: the file is missing or unreadable, has no sentence, or a line has too few columns, a different
            number of columns from the file's first line, or is not UTF-8 (each naming ``file:line``).
    """
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{file}: no such file (a CoNLL file: token ... tag per line, blank lines between sentences)")
    sentences: list[TaggedSentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    lines: list[int] = []
    width: tuple[int, int] | None = None  # (columns, line of the first data line)

    def close() -> None:
        if tokens:
            sentences.append(TaggedSentence(list(tokens), list(tags), str(file), list(lines)))
            tokens.clear()
            tags.clear()
            lines.clear()

    with file.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise DataError(f"{file}:{number}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
            if not text:
                close()
                continue
            columns = text.split()
            if columns[0] == DOCSTART:
                close()
                continue
            index = tag_column if tag_column >= 0 else len(columns) + tag_column
            if len(columns) < 2 or not 0 < index < len(columns):
                raise DataError(
                    f"{file}:{number}: {len(columns)} column(s) in {text[:60]!r}; a CoNLL line needs the token and "
                    f"a tag in column {tag_column} (data.tag_column), separated by whitespace"
                )
            if width is None:
                width = (len(columns), number)
            elif len(columns) != width[0]:
                raise DataError(
                    f"{file}:{number}: {len(columns)} columns in {text[:60]!r}, but line {width[1]} has {width[0]}; "
                    "every line of a CoNLL file has the same columns"
                )
            tokens.append(columns[0])
            tags.append(columns[index])
            lines.append(number)
    close()
    if not sentences:
        raise DataError(f"{file}: no tagged sentence (an empty file, or only -DOCSTART- lines)")
    return sentences

"""``predict`` for the tagging task: a trained tagger (BiLSTM-CRF) tags new sentences (see :meth:`~embreg.serving.trained_run.TrainedRun.predict`).

Input, in one of three forms:

* a list of sentences (strings), split into tokens the way the run's training text was split: on whitespace for a
  run on CoNLL files (``data.path``), by :func:`embreg.data.datasets.review_tags.tokenize` for a ``reviews-silver`` run;
  an empty string is an empty sentence (no tags);
* a list of token lists (already tokenised sentences), used as they are;
* a UTF-8 file, read by :data:`INPUT_FORMATS`: ``lines`` (one sentence per line, tokenised as above; blank lines
  skipped) or ``conll`` (one token per line in the first column, other columns such as gold tags ignored, a blank
  line between sentences, ``-DOCSTART-`` lines skipped). ``auto`` (the default) reads a file as CoNLL when it has a
  ``-DOCSTART-`` line, or when every non-blank line has the same number of whitespace-separated columns and a
  blank line follows a run of two or more non-blank lines (the end of a sentence of two or more tokens); otherwise
  as lines. A CoNLL file of one sentence without a blank line after it reads as lines: name the format then.

Tokens are looked up as the training vocabulary holds them (case kept, no normalisation): a token the training split
never had (or had fewer than ``data.min_count`` times) is read as ``<unk>``, as in training, marked
``status=unknown`` and counted in the summary (``unknown='error'`` refuses such input instead). Decoding is the
CRF's Viterbi search under the run's ``model.tag_scheme`` (:meth:`embreg.models.bilstm_crf.BiLSTMCRF.decode`), so
every tag sequence is a valid BIO / IOBES sequence. :func:`conll_text` writes the result as CoNLL
(``token<TAB>tag``, each sentence followed by a blank line), which ``auto`` reads back as CoNLL.

Example:
    >>> detect_format(["Ann B-PER", "met O", "", "Bo B-PER", "ran O", ""])
    'conll'
    >>> detect_format(["Ann met Bo in Rome .", "Bo ran", "", "Cy left ."])
    'lines'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from embreg.data.files.conll import DOCSTART
from embreg.errors import ConfigError, DataError
from embreg.serving.prediction import Prediction
from embreg.serving.served_run import ServedRun

__all__ = ["TaggedSentences", "INPUT_FORMATS", "predict_tags", "detect_format", "read_sentences", "conll_text"]

INPUT_FORMATS = ("auto", "lines", "conll")
"""How a tagging input file is read (module docstring)."""

_BATCH = 256


@dataclass
class TaggedSentences(Prediction):
    """Tags of new sentences by a tagging run.

    Attributes:
        table: one row per token: ``sentence`` (1-based, in input order), ``token``, ``tag`` and ``status``
            (``ok``, or ``unknown`` for a token unseen in training, read as ``<unk>``).
        summary: ``sentences``, ``tokens`` and ``unknown`` (tokens unseen in training).
        tokens: the tokens of each sentence.
        tags: the tag of each token, sentence by sentence (``tags[i][j]`` tags ``tokens[i][j]``).
    """

    tokens: list[list[str]]
    tags: list[list[str]]

    def summary_line(self) -> str:
        """One line for the command line, e.g. ``"2 sentences, 9 tokens tagged (1 unseen in training, read as
        <unk>)"``."""
        s = self.summary
        sentences = f"{s['sentences']} sentence{'' if s['sentences'] == 1 else 's'}"
        tokens = f"{s['tokens']} token{'' if s['tokens'] == 1 else 's'}"
        return f"{sentences}, {tokens} tagged ({s['unknown']} unseen in training, read as <unk>)"

    def conll(self) -> str:
        """The sentences as CoNLL text (:func:`conll_text`)."""
        return conll_text(self.tokens, self.tags)


def conll_text(tokens: Sequence[Sequence[str]], tags: Sequence[Sequence[str]]) -> str:
    """``token<TAB>tag`` per line, each sentence followed by a blank line (an empty sentence writes nothing).

    Example:
        >>> conll_text([["Ann", "ran"], []], [["B-PER", "O"], []])
        'Ann\\tB-PER\\nran\\tO\\n\\n'
    """
    parts = []
    for sentence, labels in zip(tokens, tags, strict=True):
        if sentence:
            parts.append("".join(f"{token}\t{tag}\n" for token, tag in zip(sentence, labels, strict=True)) + "\n")
    return "".join(parts)


def detect_format(lines: Sequence[str]) -> str:
    """``"conll"`` or ``"lines"``: how ``auto`` reads a file of these lines (module docstring)."""
    widths = set()
    run, closed_sentence = 0, False
    for line in lines:
        columns = line.split()
        if not columns:
            closed_sentence = closed_sentence or run >= 2
            run = 0
            continue
        if columns[0] == DOCSTART:
            return "conll"
        widths.add(len(columns))
        run += 1
    return "conll" if len(widths) == 1 and closed_sentence else "lines"


def _file_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 file, split at ``\\n`` (and ``\\r\\n``) only."""
    if not path.is_file():
        raise DataError(
            f"input file {str(path)!r} does not exist; to tag sentences held in memory pass a list, e.g. "
            "predict(['Ann met Bo in Rome .'])"
        )
    lines = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            lines.append(raw.removesuffix(b"\r").decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}:{number}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_sentences(
    path: str | Path, tokenize: Callable[[str], list[str]], input_format: str = "auto"
) -> list[list[str]]:
    """The token lists of the sentences of a file (module docstring).

    Args:
        path: a UTF-8 text file.
        tokenize: splits a line of the ``lines`` format into tokens.
        input_format: one of :data:`INPUT_FORMATS`.

    Raises:
        ConfigError: an unknown ``input_format``.
        DataError: a missing or non-UTF-8 file (naming the line), or a file without a sentence.
    """
    if input_format not in INPUT_FORMATS:
        raise ConfigError(f"input_format={input_format!r} must be one of {', '.join(INPUT_FORMATS)}")
    file = Path(path)
    lines = _file_lines(file)
    how = detect_format(lines) if input_format == "auto" else input_format
    sentences: list[list[str]] = []
    if how == "lines":
        sentences = [tokens for tokens in (tokenize(line) for line in lines) if tokens]
    else:
        current: list[str] = []
        for line in lines:
            columns = line.split()
            if not columns or columns[0] == DOCSTART:
                if current:
                    sentences.append(current)
                current = []
            else:
                current.append(columns[0])
        if current:
            sentences.append(current)
    if not sentences:
        raise DataError(f"{file}: no sentence to tag (the file is empty or blank)")
    return sentences


def _tokenizer(run: ServedRun) -> Callable[[str], list[str]]:
    """The split of the run's training text: whitespace for CoNLL files, the reviews' rule for reviews-silver."""
    if run.recipe.data.path is None:
        from embreg.data.datasets.review_tags import tokenize

        return tokenize
    return str.split


def _sentences(run: ServedRun, rows: Any, input_format: str | None) -> list[list[str]]:
    tokenize = _tokenizer(run)
    if isinstance(rows, (str, Path)):
        return read_sentences(rows, tokenize, input_format or "auto")
    if input_format is not None:
        raise ConfigError(f"input_format={input_format!r} says how to read a file; the sentences were passed as a list")
    if isinstance(rows, pd.DataFrame):
        raise DataError("a tagging run tags sentences: pass a list of sentences (or of token lists) or a file path")
    sentences = []
    for item in rows:
        if isinstance(item, str):
            sentences.append(tokenize(item))
        elif isinstance(item, Sequence) and all(isinstance(token, str) for token in item):
            sentences.append(list(item))
        else:
            raise DataError(f"a sentence to tag is a string or a list of token strings, not {item!r}")
    return sentences


@torch.no_grad()
def predict_tags(run: ServedRun, rows: Any, unknown: str, input_format: str | None = None) -> TaggedSentences:
    """Tags of ``rows`` (module docstring) by the tagging run ``run``.

    Args:
        run: a loaded run of task ``tagging``.
        rows: a file path, a list of sentences, or a list of token lists.
        unknown: ``mean`` (the default policy: a token unseen in training is read as ``<unk>``, as in training) or
            ``error`` (refuse input holding one); ``skip`` is refused: a tagger tags every token.
        input_format: how to read a file (:data:`INPUT_FORMATS`; ``None``: ``auto``).

    Raises:
        ConfigError: ``unknown='skip'``, or ``input_format`` with sentences passed as a list.
        DataError: unreadable input, or (``unknown='error'``) tokens unseen in training.
    """
    from embreg.tasks.tagging.corpus import UNK

    if unknown == "skip":
        raise ConfigError(
            "unknown='skip' leaves rows out, and a tagger tags every token: use 'mean' (a token unseen in training "
            "is read as <unk>, as in training) or 'error' (refuse input holding one)"
        )
    sentences = _sentences(run, rows, input_format)
    tokens_vocab = run.vocabularies["token"]
    tag_names = run.vocabularies["tag"].labels
    unk = int(tokens_vocab.indices([UNK])[0])
    ids: list[list[int]] = [tokens_vocab.indices(sentence).tolist() if sentence else [] for sentence in sentences]
    unseen = [[index < 0 for index in row] for row in ids]
    if unknown == "error" and any(any(row) for row in unseen):
        shown = [tok for sentence, row in zip(sentences, unseen) for tok, bad in zip(sentence, row) if bad]
        raise DataError(
            f"{len(shown)} token(s) were never seen in training, e.g. {shown[:5]}; tag them as <unk> with "
            "unknown='mean' (--unknown mean)"
        )
    tags: list[list[str]] = [[] for _ in sentences]
    model: Any = run.model
    filled = [i for i, row in enumerate(ids) if row]
    for start in range(0, len(filled), _BATCH):
        block = filled[start : start + _BATCH]
        width = max(len(ids[i]) for i in block)
        batch = torch.zeros(len(block), width, dtype=torch.long)
        mask = torch.zeros(len(block), width, dtype=torch.bool)
        for row, i in enumerate(block):
            found = torch.as_tensor(ids[i], dtype=torch.long)
            batch[row, : len(found)] = torch.where(found < 0, torch.full_like(found, unk), found)
            mask[row, : len(found)] = True
        paths = model.decode({"tokens": batch.to(run.device), "mask": mask.to(run.device)}).cpu()
        for row, i in enumerate(block):
            tags[i] = [str(tag_names[t]) for t in paths[row, : len(ids[i])].tolist()]
    table = pd.DataFrame(
        {
            "sentence": [n for n, sentence in enumerate(sentences, start=1) for _ in sentence],
            "token": [token for sentence in sentences for token in sentence],
            "tag": [tag for row in tags for tag in row],
            "status": ["unknown" if bad else "ok" for row in unseen for bad in row],
        }
    )
    summary = {
        "sentences": len(sentences),
        "tokens": len(table),
        "unknown": int((table["status"] == "unknown").sum()),
    }
    return TaggedSentences(table, summary, sentences, tags, kind="sentences")

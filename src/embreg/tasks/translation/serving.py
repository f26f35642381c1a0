"""``TrainedRun.translate`` and ``embreg translate RUN [--input FILE] [--beam N --alpha A --beta B]``.

Lines of source text are tokenised with the run's source BPE vocabulary (the one it learnt on its training split,
kept in ``tokenizers.json``), cut to ``data.max_tokens`` source pieces like the training data, decoded with
:func:`embreg.nn.decoding.beam_search` (``beam = 1``: greedy) and detokenised with the target vocabulary. Empty
lines give empty translations. What the source side lost is counted (:class:`Translations`): the lines cut to
``data.max_tokens`` pieces, and the pieces the vocabulary does not hold (read as ``<unk>``); ``embreg translate``
says both on stderr. Input files are read line by line (:func:`embreg.data.files.inputs.read_lines`: lines end at
``\n`` or ``\r\n`` only, UTF-8).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="embreg")
    >>> add_translate_parser(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["translate", "runs/nmt", "--beam", "4", "--beta", "0.2"])
    >>> args.beam, args.alpha, args.beta, args.input
    (4, None, 0.2, None)
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embreg.errors import ConfigError

__all__ = ["translate", "Translations", "non_negative_float", "add_translate_parser", "cmd_translate"]


class Translations(list):
    """The translations of the source lines, in order (a ``list`` of ``str``), and what the source side lost.

    Attributes:
        cut: source lines longer than ``max_tokens`` pieces, cut to them (as the training pairs were).
        unknown: source pieces outside the run's vocabulary, read as ``<unk>`` (counted in the pieces kept).
        max_tokens: the run's ``data.max_tokens``.
    """

    def __init__(self, texts: Sequence[str], *, cut: int = 0, unknown: int = 0, max_tokens: int = 0) -> None:
        super().__init__(texts)
        self.cut, self.unknown, self.max_tokens = cut, unknown, max_tokens

    def summary_line(self) -> str:
        """One line for stderr, e.g. ``"3 lines translated; 1 cut to data.max_tokens=24 source pieces, 0 unknown
        source pieces (<unk>)"``."""
        return (
            f"{len(self)} lines translated; {self.cut} cut to data.max_tokens={self.max_tokens} source pieces, "
            f"{self.unknown} unknown source pieces (<unk>)"
        )


def translate(
    run: Any,
    lines: Sequence[str],
    *,
    beam: int | None = None,
    alpha: float | None = None,
    beta: float | None = None,
    batch_size: int = 64,
) -> Translations:
    """Translations of ``lines`` by a loaded translation run (:func:`embreg.serving.load`).

    Args:
        run: a :class:`~embreg.serving.trained_run.TrainedRun` of task ``translation``.
        lines: source sentences.
        beam, alpha, beta: decoding (``None``: the run's ``data.beam``, ``data.alpha``, ``data.beta``).
        batch_size: sentences decoded together.

    Raises:
        ConfigError: ``beam < 1``, or an ``alpha`` / ``beta`` that is negative or not finite.
    """
    from embreg.data.parallel import SPECIAL_TOKENS, encode_texts
    from embreg.tasks.translation.evaluation import DecodeSettings, translate_ids

    d = run.recipe.data
    settings = DecodeSettings(
        beam=d.beam if beam is None else beam,
        alpha=d.alpha if alpha is None else alpha,
        beta=d.beta if beta is None else beta,
        max_len=d.max_tokens + 1,
    )
    if settings.beam < 1 or not all(math.isfinite(v) and v >= 0 for v in (settings.alpha, settings.beta)):
        raise ConfigError(
            f"beam={settings.beam}, alpha={settings.alpha}, beta={settings.beta}: the beam must be >= 1, alpha and "
            "beta finite numbers >= 0"
        )
    tokenizers = run.prepared.tokenizers
    texts = [line.strip() for line in lines]
    wanted = [i for i, text in enumerate(texts) if text]
    out = [""] * len(texts)
    cut = unknown = 0
    if wanted:
        given = [texts[i] for i in wanted]
        cut = sum(len(e.ids) > d.max_tokens for e in tokenizers["source"].encode_batch(given))
        sources = encode_texts(tokenizers["source"], given, d.max_tokens, bos=False)
        unknown = sum(ids.count(SPECIAL_TOKENS.index("<unk>")) for ids in sources)
        ids = translate_ids(run.model, sources, settings, batch_size)
        for i, target in zip(wanted, ids):
            out[i] = tokenizers["target"].decode(target)
    return Translations(out, cut=cut, unknown=unknown, max_tokens=d.max_tokens)


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0 (``--alpha nan`` or ``inf`` is an error, not a silent decoding).

    Example:
        >>> non_negative_float("0.6")
        0.6
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return value


def add_translate_parser(sub: argparse._SubParsersAction) -> None:
    """Adds ``translate`` to the ``embreg`` sub-commands."""
    from embreg.cli_arguments import positive_int
    from embreg.serving.cli import add_overwrite_argument, add_run_arguments

    parser = sub.add_parser(
        "translate",
        help="translate lines of text with a translation run (file or stdin)",
        description="Translates each input line (lines end at \\n or \\r\\n; UTF-8) into one output line. A line "
        "longer than the run's data.max_tokens source pieces is cut to them, as the training pairs were; stderr "
        "says how many lines were cut and how many source pieces were unknown to the run's vocabulary (<unk>).",
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--input", help="a UTF-8 text file, one sentence per line, cut to data.max_tokens pieces (default: stdin)"
    )
    parser.add_argument("--out", help="file to write the translations to, one per line (default: stdout)")
    add_overwrite_argument(parser)
    parser.add_argument("--beam", type=positive_int, help="beam width (1: greedy; default: the run's data.beam)")
    parser.add_argument(
        "--alpha", type=non_negative_float, help="GNMT length normalisation exponent, >= 0 (default: data.alpha)"
    )
    parser.add_argument(
        "--beta", type=non_negative_float, help="GNMT coverage penalty weight, >= 0 (default: data.beta)"
    )
    parser.add_argument("--checkpoint", choices=("best", "last"), default="best")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    parser.set_defaults(func=cmd_translate)


def cmd_translate(args: argparse.Namespace) -> int:
    from embreg.serving.cli import checked_out, load_run
    from embreg.data.files.inputs import read_lines, read_stdin_lines

    checked_out(args, [args.input])
    lines = read_lines(args.input) if args.input is not None else read_stdin_lines()
    run = load_run(args)
    translations = run.translate(lines, beam=args.beam, alpha=args.alpha, beta=args.beta)
    written = "".join(f"{line}\n" for line in translations)
    if args.out:
        Path(args.out).write_text(written, encoding="utf-8")
        print(f"{translations.summary_line()} -> {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(written)
        print(translations.summary_line(), file=sys.stderr)
    return 0

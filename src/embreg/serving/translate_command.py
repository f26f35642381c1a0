"""``embreg translate RUN [--input FILE] [--out FILE] [--beam N --alpha A --beta B]``.

Input files are read line by line (:func:`embreg.data.files.inputs.read_lines`: lines end at ``\\n`` or ``\\r\\n``
only, UTF-8) and translated by :func:`embreg.tasks.translation.serving.translate`; stderr says how many lines were
cut to ``data.max_tokens`` pieces and how many source pieces were unknown.

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
from pathlib import Path

__all__ = ["non_negative_float", "add_translate_parser", "cmd_translate"]


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
    from embreg.data.files.inputs import read_lines, read_stdin_lines
    from embreg.serving.cli import checked_out, load_run

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

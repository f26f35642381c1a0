"""``TrainedRun.translate`` and ``embreg translate RUN [--input FILE] [--beam N --alpha A --beta B]``.

Lines of source text are tokenised with the run's source BPE vocabulary (the one it learnt on its training split,
kept in ``tokenizers.json``), cut to ``data.max_tokens`` tokens like the training data, decoded with
:func:`embreg.nn.decoding.beam_search` (``beam = 1``: greedy) and detokenised with the target vocabulary. Empty
lines give empty translations.

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
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embreg.errors import ConfigError, DataError

__all__ = ["translate", "add_translate_parser", "cmd_translate"]


def translate(
    run: Any,
    lines: Sequence[str],
    *,
    beam: int | None = None,
    alpha: float | None = None,
    beta: float | None = None,
    batch_size: int = 64,
) -> list[str]:
    """Translations of ``lines`` by a loaded translation run (:func:`embreg.serving.load`).

    Args:
        run: a :class:`~embreg.serving.trained_run.TrainedRun` of task ``translation``.
        lines: source sentences.
        beam, alpha, beta: decoding (``None``: the run's ``data.beam``, ``data.alpha``, ``data.beta``).
        batch_size: sentences decoded together.

    Raises:
        ConfigError: ``beam < 1`` or a negative ``alpha`` / ``beta``.
    """
    from embreg.data.parallel import encode_texts
    from embreg.train.translation_eval import DecodeSettings, translate_ids

    d = run.recipe.data
    settings = DecodeSettings(
        beam=d.beam if beam is None else beam,
        alpha=d.alpha if alpha is None else alpha,
        beta=d.beta if beta is None else beta,
        max_len=d.max_tokens + 1,
    )
    if settings.beam < 1 or settings.alpha < 0 or settings.beta < 0:
        raise ConfigError(f"--beam {settings.beam} must be >= 1 and --alpha/--beta >= 0")
    tokenizers = run.prepared.tokenizers
    texts = [line.strip() for line in lines]
    wanted = [i for i, text in enumerate(texts) if text]
    out = [""] * len(texts)
    if wanted:
        sources = encode_texts(tokenizers["source"], [texts[i] for i in wanted], d.max_tokens, bos=False)
        ids = translate_ids(run.model, sources, settings, batch_size)
        for i, target in zip(wanted, ids):
            out[i] = tokenizers["target"].decode(target)
    return out


def add_translate_parser(sub: argparse._SubParsersAction) -> None:
    """Adds ``translate`` to the ``embreg`` sub-commands."""
    from embreg.cli import positive_int
    from embreg.serving.cli import add_overwrite_argument, add_run_arguments

    parser = sub.add_parser("translate", help="translate lines of text with a translation run (file or stdin)")
    add_run_arguments(parser)
    parser.add_argument("--input", help="a UTF-8 text file, one sentence per line (default: stdin)")
    parser.add_argument("--out", help="file to write the translations to, one per line (default: stdout)")
    add_overwrite_argument(parser)
    parser.add_argument("--beam", type=positive_int, help="beam width (1: greedy; default: the run's data.beam)")
    parser.add_argument("--alpha", type=float, help="GNMT length normalisation exponent (default: data.alpha)")
    parser.add_argument("--beta", type=float, help="GNMT coverage penalty weight (default: data.beta)")
    parser.add_argument("--checkpoint", choices=("best", "last"), default="best")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    parser.set_defaults(func=cmd_translate)


def cmd_translate(args: argparse.Namespace) -> int:
    from embreg.serving.cli import checked_out, load_run

    checked_out(args, [args.input])
    if args.input is not None:
        source = Path(args.input)
        if not source.is_file():
            raise DataError(f"input text {str(source)!r} does not exist")
        text = source.read_text(encoding="utf-8")
    else:
        text = sys.stdin.read()
    run = load_run(args)
    translations = run.translate(text.splitlines(), beam=args.beam, alpha=args.alpha, beta=args.beta)
    written = "".join(f"{line}\n" for line in translations)
    if args.out:
        Path(args.out).write_text(written, encoding="utf-8")
        print(f"{len(translations)} lines translated -> {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(written)
    return 0

"""``embreg predict | recommend | score | export``: use a trained run from the command line.

    embreg predict RUN --input FILE [--out FILE] [--unknown mean|error|skip] [--input-format auto|lines|conll]
                   [--checkpoint best|last] [--device D]
    embreg recommend RUN (--users U1,U2 | --all) [--k 10] [--include-seen] [--history I1,I2,...] --out FILE.csv
    embreg score RUN --input TEXT [--out FILE.csv]
    embreg export RUN --out DIR
    embreg ensemble RUN [RUN ...] [--split test] [--snapshots] [--checkpoint best|last] [--out FILE.json]

Each prints a one-line summary; ``predict`` counts the rows with ids never seen in training and what the
``--unknown`` policy did with them (for texts: the texts predicted, empty, cut to ``data.max_length`` word pieces,
and the unknown word pieces; for a tagging run: the sentences, tokens and tokens unseen in training). Text inputs
are read line by line (:mod:`embreg.data.files.inputs`). ``predict`` writes CSV, or CoNLL for a tagging run, to
``--out`` or, without it, to stdout (the summary then on stderr). Every command that loads one run takes
``--seed S`` (one seed of a multi-seed run), ``--allow-unfinished`` and ``--allow-failed``
(:mod:`embreg.serving.run_checks`). Every ``--out`` is checked before any work (:mod:`embreg.runs.output_paths`):
a run's files and the input are never written, and an existing file is replaced only with ``--overwrite``.
``predict`` exits with status 1 when a prediction is not finite (the table is written, those rows with
``status=non-finite``).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="embreg")
    >>> add_serving_parsers(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["recommend", "runs/bpr", "--users", "1,2", "--k", "5", "--out", "top.csv"])
    >>> args.users, args.k, args.include_seen
    ('1,2', 5, False)
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from embreg.serving.trained_run import TrainedRun

__all__ = [
    "add_serving_parsers",
    "add_run_arguments",
    "add_overwrite_argument",
    "checked_out",
    "load_run",
    "cmd_predict",
    "cmd_recommend",
    "cmd_score",
    "cmd_export",
    "cmd_ensemble",
]


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``RUN``, ``--seed``, ``--allow-unfinished`` and ``--allow-failed``: which run a command loads."""
    parser.add_argument("run", help="a run directory (of a multi-seed run: with --seed S)")
    parser.add_argument("--seed", type=int, help="the seed-<S>/ folder of a multi-seed run (embreg run --seeds N)")
    parser.add_argument(
        "--allow-unfinished",
        action="store_true",
        help="serve a run that is still training or was stopped (a warning names its checkpoint's epoch)",
    )
    parser.add_argument(
        "--allow-failed", action="store_true", help="serve a run whose training failed (diverged or non-finite)"
    )


def add_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing --out file (never a run's file or the input)"
    )


def _common(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    parser.add_argument("--checkpoint", choices=("best", "last", "averaged"), default="best")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")


def add_serving_parsers(sub: argparse._SubParsersAction) -> None:
    """Adds ``predict``, ``recommend``, ``score`` and ``export`` to the ``embreg`` sub-commands."""
    from embreg.cli_arguments import positive_int  # the argparse type every embreg command shares
    from embreg.serving.trained_run import UNKNOWN_POLICIES
    from embreg.tasks.tagging.serving import INPUT_FORMATS

    predict = sub.add_parser(
        "predict",
        help="predict ratings, clicks, classes or values for new rows / texts; tag new sentences",
        description="rating, ctr: rows in the training file's format -> CSV (the rows' ids, the prediction, status); "
        "classification, regression: texts, one per line (or a table with data.text_col) -> CSV (every input "
        "column, then label and probability, or value, and status); tagging: sentences, one per line, or a "
        "CoNLL file (tokens in the first column) -> CoNLL (token<TAB>tag, a blank line after each sentence). "
        "The summary line counts ids (tagging: tokens) unseen in training.",
    )
    _common(predict)
    add_overwrite_argument(predict)
    predict.add_argument(
        "--input",
        required=True,
        help="rows in the training file's format; for text runs also a UTF-8 text file, one text per line (every "
        "input column is kept, the prediction columns are added); for tagging runs sentences, one per line, or CoNLL",
    )
    predict.add_argument(
        "--out", help="file to write: CSV, or CoNLL for a tagging run (default: stdout, the summary on stderr)"
    )
    predict.add_argument(
        "--unknown",
        choices=UNKNOWN_POLICIES,
        default="mean",
        help="rows with ids unseen in training (default mean); tagging: mean reads an unseen token as <unk>, "
        "error refuses it",
    )
    predict.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        help="tagging runs: read --input as one sentence per line (lines) or as CoNLL (conll); default auto: CoNLL "
        "when it has a -DOCSTART- line, or every non-blank line has the same number of columns and a blank line "
        "ends a sentence of two or more tokens",
    )
    predict.set_defaults(func=cmd_predict)

    recommend = sub.add_parser("recommend", help="top-k unseen items per user (ranking and next-item runs)")
    _common(recommend)
    who = recommend.add_mutually_exclusive_group()
    who.add_argument("--users", help="comma-separated original user ids")
    who.add_argument("--all", action="store_true", help="every user with a history in the run's data")
    recommend.add_argument("--k", type=positive_int, default=10)
    recommend.add_argument("--include-seen", action="store_true", help="do not exclude the user's own items")
    recommend.add_argument("--history", help="next-item: comma-separated item ids, oldest first")
    recommend.add_argument("--batch-size", type=positive_int, default=1024)
    recommend.add_argument("--out", required=True, help="CSV file to write (user, item, rank, score)")
    add_overwrite_argument(recommend)
    recommend.set_defaults(func=cmd_recommend)

    score = sub.add_parser(
        "score",
        help="per-line and total perplexity of a text (language-model runs)",
        description="Scores each input line (lines end at \\n or \\r\\n; UTF-8) in full: the language model reads "
        "a line of any length, nothing is cut. Words outside the run's vocabulary are read as <unk> and counted.",
    )
    _common(score)
    score.add_argument("--input", required=True, help="a UTF-8 text file, one sentence per line (scored in full)")
    score.add_argument("--out", help="CSV file to write (line, tokens, unknown, loss, perplexity)")
    add_overwrite_argument(score)
    score.set_defaults(func=cmd_score)

    export = sub.add_parser(
        "export",
        help="a run's model for other tools (Hugging Face, plain safetensors), usable without the run directory",
        description="fine-tuned encoders and masked LMs: a Hugging Face directory (weights, tokenizer, config.json "
        "with id2label/label2id); every other model: model.safetensors (its state_dict) and embreg_export.json (task, "
        "recipe, the original id of each index, the model class; a tagger's token vocabulary, tag names and model "
        "arguments; a translator's source_tokenizer.json and target_tokenizer.json, Hugging Face tokenizers files, "
        "and its decoding settings: special ids, maximum lengths, beam). docs/exports.md shows the lines of Python "
        "that use each.",
    )
    _common(export)
    export.add_argument("--out", required=True, help="directory to write (new, or empty)")
    export.set_defaults(func=cmd_export)

    ensemble = sub.add_parser(
        "ensemble", help="evaluate the ensemble averaging several runs' predictions (seeds, snapshots, recipes)"
    )
    ensemble.add_argument("runs", nargs="+", help="run directories of one task and data (a multi-seed one: its seeds)")
    ensemble.add_argument("--split", default="test", help="the split of the runs' data to evaluate on (default test)")
    ensemble.add_argument("--snapshots", action="store_true", help="each run's cosine-cycle snapshots as members")
    ensemble.add_argument("--checkpoint", choices=("best", "last", "averaged"), default="best")
    ensemble.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    ensemble.add_argument("--out", help="JSON file to write (members' and the ensemble's metrics)")
    add_overwrite_argument(ensemble)
    ensemble.set_defaults(func=cmd_ensemble)


def _ids(text: str | None) -> list[str] | None:
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]


def _write(table: Any, out: str) -> Path:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    return path


def checked_out(args: argparse.Namespace, inputs: Sequence[str | None] = ()) -> None:
    """Refuses ``args.out`` before any work (:func:`embreg.runs.output_paths.check_output_file`): a run's file
    (of the served run or any other), one of ``inputs``, a directory, or an existing file without ``--overwrite``."""
    from embreg.runs.output_paths import check_output_file

    if args.out is not None:
        check_output_file(args.out, inputs=[i for i in inputs if i is not None], overwrite=args.overwrite)


def load_run(args: argparse.Namespace, device: str | None = None) -> TrainedRun:
    """The run ``args`` name (``run``, ``--seed``, ``--checkpoint``, ``--device``, ``--allow-*``); the warning of an
    allowed unfinished or failed run is printed as ``embreg: warning: ...``."""
    from embreg.serving import load
    from embreg.serving.run_checks import UnfinishedRunWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnfinishedRunWarning)
        run = load(
            args.run,
            checkpoint=args.checkpoint,
            device=device or args.device,
            seed=args.seed,
            allow_unfinished=args.allow_unfinished,
            allow_failed=args.allow_failed,
        )
    for warning in caught:
        if issubclass(warning.category, UnfinishedRunWarning):
            print(f"embreg: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    return run


def cmd_predict(args: argparse.Namespace) -> int:
    from embreg.tasks.tagging.serving import TaggedSentences

    checked_out(args, [args.input])
    run = load_run(args)
    prediction = run.predict(args.input, unknown=args.unknown, input_format=args.input_format)
    if args.out is None:
        if isinstance(prediction, TaggedSentences):
            sys.stdout.write(prediction.conll())
        else:
            prediction.table.to_csv(sys.stdout, index=False)
        print(prediction.summary_line(), file=sys.stderr)
    else:
        if isinstance(prediction, TaggedSentences):
            path = Path(args.out)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(prediction.conll(), encoding="utf-8")
        else:
            path = _write(prediction.table, args.out)
        print(f"{prediction.summary_line()} -> {path}")
    if prediction.summary.get("non_finite", 0):
        print(
            f"embreg: error: {prediction.summary['non_finite']} of {len(prediction.table)} predictions are not finite "
            "(status non-finite): the model gave NaN or infinity (weights that are not finite, as a failed run's, or "
            "inputs far outside the training data)",
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_recommend(args: argparse.Namespace) -> int:
    from embreg.errors import ConfigError

    users = _ids(args.users)
    history = _ids(args.history)
    if users is None and not args.all and history is None:
        raise ConfigError("name the users: --users U1,U2,... or --all (or give a next-item --history)")
    checked_out(args)
    run = load_run(args)
    table = run.recommend(users, k=args.k, include_seen=args.include_seen, history=history, batch_size=args.batch_size)
    path = _write(table, args.out)
    print(f"{table['user'].nunique()} users, top-{args.k} items ({len(table)} rows) -> {path}")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from embreg.data.files.inputs import read_lines

    checked_out(args, [args.input])
    lines = read_lines(args.input)
    run = load_run(args)
    table = run.score(lines)
    total = table.iloc[-1]
    where = ""
    if args.out:
        where = f" -> {_write(table, args.out)}"
    print(
        f"{len(table) - 1} lines, {int(total['tokens'])} tokens ({int(total['unknown'])} unknown): "
        f"perplexity {total['perplexity']:.2f}{where}"
    )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from embreg.serving.exporting import check_export_directory, export

    check_export_directory(args.out)
    run = load_run(args, device="cpu")
    written = export(run, args.out)
    print(f"exported {run.task} run {run.path} -> {written}")
    return 0


def cmd_ensemble(args: argparse.Namespace) -> int:
    import json

    from embreg.serving.ensemble import load_ensemble, report_table

    checked_out(args)
    ensemble = load_ensemble(args.runs, checkpoint=args.checkpoint, device=args.device, snapshots=args.snapshots)
    result = {
        "task": ensemble.task,
        "split": args.split,
        "members": dict(zip(ensemble.labels, ensemble.member_metrics(args.split), strict=True)),
        "ensemble": ensemble.evaluate(args.split),
    }
    print(report_table(result), end="")
    if args.out:
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2) + "\n")
    return 0

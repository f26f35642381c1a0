"""``embreg predict | recommend | score | export``: use a trained run from the command line.

    embreg predict RUN --input FILE --out FILE.csv [--unknown mean|error|skip] [--checkpoint best|last] [--device D]
    embreg recommend RUN (--users U1,U2 | --all) [--k 10] [--include-seen] [--history I1,I2,...] --out FILE.csv
    embreg score RUN --input TEXT [--out FILE.csv]
    embreg export RUN --out DIR
    embreg ensemble RUN [RUN ...] [--split test] [--snapshots] [--checkpoint best|last] [--out FILE.json]

Each prints a one-line summary; ``predict`` counts the rows with ids never seen in training and what the
``--unknown`` policy did with them, or, for texts, the texts predicted, empty, cut to ``data.max_length`` word pieces,
and the unknown word pieces. Text inputs are read line by line (:mod:`embreg.serving.inputs`).

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
from pathlib import Path
from typing import Any

__all__ = ["add_serving_parsers", "cmd_predict", "cmd_recommend", "cmd_score", "cmd_export", "cmd_ensemble"]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a single-seed run directory (one seed-<s>/ of a multi-seed run)")
    parser.add_argument("--checkpoint", choices=("best", "last", "averaged"), default="best")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")


def add_serving_parsers(sub: argparse._SubParsersAction) -> None:
    """Adds ``predict``, ``recommend``, ``score`` and ``export`` to the ``embreg`` sub-commands."""
    from embreg.cli import positive_int  # the argparse type every embreg command shares
    from embreg.serving.trained_run import UNKNOWN_POLICIES

    predict = sub.add_parser("predict", help="predict ratings, clicks, classes or values for new rows / texts")
    _common(predict)
    predict.add_argument(
        "--input",
        required=True,
        help="rows in the training file's format; for text runs also a UTF-8 text file, one text per line (every "
        "input column is kept, the prediction columns are added)",
    )
    predict.add_argument("--out", required=True, help="CSV file to write")
    predict.add_argument(
        "--unknown", choices=UNKNOWN_POLICIES, default="mean", help="rows with ids unseen in training (default mean)"
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
    score.set_defaults(func=cmd_score)

    export = sub.add_parser("export", help="a run's model for other tools (Hugging Face, plain safetensors)")
    _common(export)
    export.add_argument("--out", required=True, help="directory to write")
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
    ensemble.set_defaults(func=cmd_ensemble)


def _ids(text: str | None) -> list[str] | None:
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]


def _write(table: Any, out: str) -> Path:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    return path


def cmd_predict(args: argparse.Namespace) -> int:
    from embreg.serving import load

    run = load(args.run, checkpoint=args.checkpoint, device=args.device)
    prediction = run.predict(args.input, unknown=args.unknown)
    path = _write(prediction.table, args.out)
    print(f"{prediction.summary_line()} -> {path}")
    return 0


def cmd_recommend(args: argparse.Namespace) -> int:
    from embreg.errors import ConfigError
    from embreg.serving import load

    users = _ids(args.users)
    history = _ids(args.history)
    if users is None and not args.all and history is None:
        raise ConfigError("name the users: --users U1,U2,... or --all (or give a next-item --history)")
    run = load(args.run, checkpoint=args.checkpoint, device=args.device)
    table = run.recommend(users, k=args.k, include_seen=args.include_seen, history=history, batch_size=args.batch_size)
    path = _write(table, args.out)
    print(f"{table['user'].nunique()} users, top-{args.k} items ({len(table)} rows) -> {path}")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from embreg.serving import load
    from embreg.serving.inputs import read_lines

    lines = read_lines(args.input)
    run = load(args.run, checkpoint=args.checkpoint, device=args.device)
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
    from embreg.serving import load
    from embreg.serving.exporting import export

    run = load(args.run, checkpoint=args.checkpoint, device="cpu")
    written = export(run, args.out)
    print(f"exported {run.task} run {run.path} -> {written}")
    return 0


def cmd_ensemble(args: argparse.Namespace) -> int:
    import json

    from embreg.serving.ensemble import load_ensemble, report_table

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

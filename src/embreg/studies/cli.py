"""``embreg study``: run a study file, write its page, regenerate the results hub.

    embreg study run STUDY.yaml [--workers N] [--log PATH] [--set KEY=VALUE ...] [--report/--no-report]
                                [--results DIR] [--progress/--no-progress]
    embreg study report STUDY.yaml [--log PATH] [--results DIR]
    embreg study hub [--results DIR]

The run log defaults to ``<study file's folder>/logs/<name>.jsonl`` (``studies/logs/sse-bpr.jsonl``); the page goes
to ``<results>/<name>/`` (``docs/results/sse-bpr/``) and the hub to ``<results>/README.md``. ``run`` resumes from
the log, so the same command continues an interrupted study.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="embreg")
    >>> _ = add_study_parser(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["study", "run", "studies/sse-bpr.yaml", "--workers", "4", "--set", "train.epochs=2"])
    >>> args.workers, args.set, args.report
    (4, ['train.epochs=2'], True)
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_study_parser", "cmd_study_run", "cmd_study_report", "cmd_study_hub"]


def _shown(path: Path) -> str:
    """The study file as a command shows it: relative to the current folder when it lies below it."""
    if path.is_absolute():
        try:
            return path.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return path.as_posix()
    return path.as_posix()


def _command(study: Path, overrides: list[str]) -> str:
    return f"embreg study run {shlex.quote(_shown(study))}" + "".join(f" --set {shlex.quote(o)}" for o in overrides)


def _report(spec: Any, records: list[Any], results: Path, command: str) -> None:
    from embreg.studies.hub import write_hub
    from embreg.studies.report import write_report

    summary = write_report(spec, records, results / spec.name, command=command)
    hub = write_hub(results)
    for claim in summary["claims"]:
        print(f"  {claim['verdict']:44s} {claim['claim']}")
    print(f"page: {results / spec.name / 'README.md'}\nhub:  {hub}")


def cmd_study_run(args: argparse.Namespace) -> int:
    from embreg.studies.runner import default_log_path, run_study
    from embreg.studies.spec import load_study

    study = Path(args.study)
    spec = load_study(study)
    log = Path(args.log) if args.log else default_log_path(study, spec.name)
    try:
        records = run_study(spec, log, workers=args.workers, extra_overrides=args.set, progress=args.progress)
    except KeyboardInterrupt:
        print(f"embreg: interrupted; finished runs are in {log}: run the same command again to resume", file=sys.stderr)
        return 130
    final = sum(r.phase == "final" for r in records)
    print(f"{spec.name}: {len(records)} runs in {log} ({final} final)")
    if args.report:
        _report(spec, records, Path(args.results), _command(study, args.set))
    return 0


def cmd_study_report(args: argparse.Namespace) -> int:
    from embreg.errors import DataError
    from embreg.studies.runlog import RunLog
    from embreg.studies.runner import default_log_path
    from embreg.studies.spec import load_study

    study = Path(args.study)
    spec = load_study(study)
    log = Path(args.log) if args.log else default_log_path(study, spec.name)
    records = RunLog(log).read()
    if not any(r.phase == "final" for r in records):
        raise DataError(f"study log {log} has no final runs to report; run the study first: {_command(study, [])}")
    _report(spec, records, Path(args.results), _command(study, []))
    return 0


def cmd_study_hub(args: argparse.Namespace) -> int:
    from embreg.studies.hub import write_hub

    print(f"hub: {write_hub(args.results)}")
    return 0


def add_study_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``embreg study run|report|hub`` to the ``embreg`` parser's subcommands; returns the ``study`` parser."""
    from embreg.cli_arguments import positive_int  # the argparse type every embreg command shares

    study = subparsers.add_parser(
        "study", help="run a study file (recipes x overrides x seeds, tuned, resumable) and write its results page"
    )
    sub = study.add_subparsers(dest="study_command", required=True)

    run = sub.add_parser("run", help="run (or resume) a study, then write its page and the results hub")
    run.add_argument("study", help="the study file (studies/<name>.yaml)")
    run.add_argument("--workers", type=positive_int, default=1, help="runs trained at once (processes)")
    run.add_argument("--log", help="run log (default <study folder>/logs/<name>.jsonl)")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override of every run, after the study's own (recorded in the log)",
    )
    run.add_argument(
        "--report", action=argparse.BooleanOptionalAction, default=True, help="write the page and the hub afterwards"
    )
    run.add_argument("--results", default="docs/results", help="results folder (default docs/results)")
    run.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True, help="progress bar")
    run.set_defaults(func=cmd_study_run)

    report = sub.add_parser("report", help="write a study's page and the results hub from its run log alone")
    report.add_argument("study")
    report.add_argument("--log", help="run log (default <study folder>/logs/<name>.jsonl)")
    report.add_argument("--results", default="docs/results")
    report.set_defaults(func=cmd_study_report)

    hub = sub.add_parser("hub", help="regenerate <results>/README.md from every <results>/*/summary.json")
    hub.add_argument("--results", default="docs/results")
    hub.set_defaults(func=cmd_study_hub)
    return study

"""The NLP families on a GPU, in one prepared run: every NLP family's ``gpu`` tests, then the translation study's
full-data arm at a GPU budget, within a time limit, writing results where the pages read them.

1. **Tests.** The ``gpu``-marked tests of ``tests/gpu/`` that concern the NLP families: the parametrised family
   tests of every model serving an NLP task (language models, text classification, masked LM, sequence labelling,
   translation; read from the registry), and the files of the NLP parts (the CRF, the translation family). They run
   with ``pytest -m gpu``; the outcome of each test goes to ``<results>/gpu-nlp-check/README.md`` and
   ``tests.json``.
2. **Study.** ``studies/translation-sse-gpu.yaml`` (the full-data arm of ``translation-sse``: the shipped
   ``translation`` and ``translation-sse`` recipes on every training pair, with the lexicon row, on CUDA) runs with
   ``--workers`` processes sharing the GPU until the time left runs out; the study resumes from its run log, so a
   later run of this script continues it. Its page is then written from the log (``embreg study report``) to
   ``<results>/translation-sse-gpu/``.

    python benchmarks/gpu_nlp_check.py [--test-minutes 4] [--minutes 10] [--workers 6] [--results docs/results]
                                       [--log-dir studies/logs] [--skip-tests | --skip-study]
    python benchmarks/gpu_nlp_check.py --dry-run      # no GPU needed: the selected tests and the commands

Where one command may run 10 minutes at most, run it twice: ``--skip-study``, then ``--skip-tests --minutes 9``.

A machine without network access needs the datasets in ``$EMBREG_HOME`` (``trans-de-en``; the families' tests skip a
family whose data is missing): copy ``~/.cache/embreg/datasets`` there first.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "studies" / "translation-sse-gpu.yaml"
NLP_TASKS = ("lm", "classification", "regression", "mlm", "tagging", "translation")
"""Tasks of the NLP families (text classification and regression are the text models')."""
NLP_FILES = ("test_gpu_crf.py", "test_gpu_translation.py")
"""Test files of tests/gpu/ that concern NLP parts alone."""


def nlp_families() -> list[str]:
    """The registered models serving an NLP task (``transformer-nmt``, ``encoder-mlm``, ``bilstm-crf``, ...)."""
    from embreg.registry import REGISTRY

    return [
        name for name in REGISTRY.names("model") if set(REGISTRY.get("model", name).accepts()["tasks"]) & set(NLP_TASKS)
    ]


def select_tests(collected: list[str], families: list[str]) -> list[str]:
    """The NLP tests among pytest node ids: those of :data:`NLP_FILES`, and family tests parametrised by an NLP
    family (the id's parameters name the family: ``test_family_...[transformer-nmt-bf16]``).

    Example:
        >>> select_tests(["tests/gpu/test_gpu_crf.py::test_a[bio]", "tests/gpu/test_gpu_families.py::t[mf-fp32]",
        ...               "tests/gpu/test_gpu_families.py::t[transformer-nmt-fp32]"], ["transformer-nmt"])
        ['tests/gpu/test_gpu_crf.py::test_a[bio]', 'tests/gpu/test_gpu_families.py::t[transformer-nmt-fp32]']
    """
    chosen = []
    for node in collected:
        path, _, name = node.partition("::")
        parameters = name.partition("[")[2]
        if Path(path).name in NLP_FILES or any(
            parameters.startswith(f"{family}-") or parameters == f"{family}]" for family in families
        ):
            chosen.append(node)
    return chosen


def collect() -> list[str]:
    """Node ids of every test of ``tests/gpu/`` (collected, not run)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests/gpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return [line for line in out.stdout.splitlines() if "::" in line]


def run_tests(tests: list[str], results: Path, deadline: float) -> dict:
    """Runs ``tests`` with ``-m gpu`` (until ``deadline``); writes ``tests.json`` and ``README.md``."""
    folder = results / "gpu-nlp-check"
    folder.mkdir(parents=True, exist_ok=True)
    report = folder / "junit.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "gpu",
        "-q",
        "-rA",
        "-p",
        "no:cacheprovider",
        "--junitxml",
        str(report),
        *tests,
    ]
    began = time.time()
    try:
        done = subprocess.run(command, cwd=ROOT, timeout=max(deadline - time.time(), 1), check=False)
        returncode: int | None = done.returncode
    except subprocess.TimeoutExpired:
        returncode = None
    outcomes = junit_outcomes(report) if report.is_file() else {}
    record = {"returncode": returncode, "seconds": time.time() - began, "outcomes": outcomes, "machine": machine()}
    (folder / "tests.json").write_text(json.dumps(record, indent=2) + "\n")
    (folder / "README.md").write_text(tests_markdown(record))
    report.unlink(missing_ok=True)
    return record


def junit_outcomes(path: Path) -> dict[str, str]:
    """``{test: passed | failed | error | skipped: reason}`` from a JUnit XML report."""
    import xml.etree.ElementTree as ET

    outcomes = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "error"
            elif child.tag == "skipped":
                outcome = f"skipped: {child.get('message', '')}"
        outcomes[name] = outcome
    return outcomes


def tests_markdown(record: dict) -> str:
    outcomes = record["outcomes"]
    counts: dict[str, int] = {}
    for outcome in outcomes.values():
        key = outcome.split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    finished = "timed out" if record["returncode"] is None else f"exit status {record['returncode']}"
    lines = [
        "# The NLP families' GPU tests",
        "",
        "Generated by `benchmarks/gpu_nlp_check.py`; do not edit.",
        "",
        f"Machine: {record['machine']}. {len(outcomes)} tests, {finished}, {record['seconds']:.0f} s: "
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())),
        "",
        "| test | outcome |",
        "|---|---|",
        *(f"| `{name}` | {outcome} |" for name, outcome in sorted(outcomes.items())),
        "",
    ]
    return "\n".join(lines)


def machine() -> str:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    return f"{gpu}, torch {torch.__version__}, {os.cpu_count()} CPUs"


def study_commands(results: Path, log_dir: Path, workers: int) -> tuple[list[str], list[str]]:
    """The ``embreg study run`` and ``embreg study report`` commands of the GPU arm."""
    log = log_dir / "translation-sse-gpu.jsonl"
    embreg = [sys.executable, "-m", "embreg.cli"]
    common = ["--log", str(log), "--results", str(results)]
    run = [*embreg, "study", "run", str(STUDY), "--workers", str(workers), "--no-report", "--no-progress", *common]
    return run, [*embreg, "study", "report", str(STUDY), *common]


def run_study(results: Path, log_dir: Path, workers: int, deadline: float) -> dict:
    """Runs the GPU arm until ``deadline`` (a stopped study keeps its finished runs), then writes its page."""
    run, report = study_commands(results, log_dir, workers)
    log_dir.mkdir(parents=True, exist_ok=True)
    began = time.time()
    process = subprocess.Popen(run, cwd=ROOT, start_new_session=True)
    try:
        returncode: int | None = process.wait(timeout=max(deadline - time.time() - 30, 1))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 15)  # the runner appends finished runs only: the log stays whole
        process.wait()
        returncode = None
    reported = subprocess.run(report, cwd=ROOT, check=False).returncode
    return {"returncode": returncode, "report_returncode": reported, "seconds": time.time() - began}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="time for the study arm (default: %(default)s)")
    parser.add_argument("--test-minutes", type=float, default=4.0, help="time for the tests (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=6, help="study runs training at once on the GPU")
    parser.add_argument("--results", default=str(ROOT / "docs" / "results"), help="where the pages go")
    parser.add_argument("--log-dir", default=str(ROOT / "studies" / "logs"), help="where the study's run log goes")
    parser.add_argument("--skip-tests", action="store_true", help="run the study arm only")
    parser.add_argument("--skip-study", action="store_true", help="run the tests only")
    parser.add_argument("--dry-run", action="store_true", help="check the study, list the tests and the commands")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.minutes <= 0 or args.test_minutes <= 0:
        parser.error("--workers must be >= 1, --minutes and --test-minutes > 0")
    results, log_dir = Path(args.results).resolve(), Path(args.log_dir).resolve()
    tests = select_tests(collect(), nlp_families()) if not args.skip_tests else []
    run, report = study_commands(results, log_dir, args.workers)
    if args.dry_run:
        from embreg.studies.runner import _check, planned_runs
        from embreg.studies.spec import load_study

        spec = load_study(STUDY)
        _check(spec, ["train.device=cpu"])  # every recipe and metric name, checked without a GPU
        print(f"{len(tests)} gpu tests of the NLP families ({', '.join(nlp_families())}):")
        print("\n".join(f"  {t}" for t in tests))
        print(f"study {spec.name}: {planned_runs(spec)} runs, {args.minutes:g} min")
        print("  " + shlex.join(run) + "\n  " + shlex.join(report))
        return 0
    import torch

    if not torch.cuda.is_available():
        print("gpu_nlp_check: torch sees no CUDA device; --dry-run checks the script without one", file=sys.stderr)
        return 2
    outcome = {}
    if tests:
        outcome["tests"] = run_tests(tests, results, time.time() + args.test_minutes * 60)
    if not args.skip_study:
        outcome["study"] = run_study(results, log_dir, args.workers, time.time() + args.minutes * 60)
    print(json.dumps({k: {key: v for key, v in r.items() if key != "outcomes"} for k, r in outcome.items()}, indent=2))
    failed = [n for n, o in outcome.get("tests", {}).get("outcomes", {}).items() if o in ("failed", "error")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Speed of ``embreg predict`` on a fine-tuned MiniLM: texts per second against a bare model loop, and the fixed
cost of one command, with where its time goes.

Target: ``embreg predict RUN --input FILE`` on 1,000 texts, run in-process through the function the command line
calls (``embreg.cli.main``: loading the run, reading the file, predicting, writing the CSV), reaches >= 0.8x the
texts per second of a bare loop over the same texts in the same process: the run's tokenizer called on each batch
of 256 texts (``data.max_length`` word pieces, as predict cuts them) and ``model(batch)`` on it, the model already
loaded. The two sides take turns for ``--rounds`` rounds; the ratio of their medians is reported.

Fixed cost: the wall time of a whole ``embreg predict`` process on 4 texts (median of ``--commands`` runs), and its
breakdown (:func:`phases`: imports, the registry, preparing the run's data, loading the pretrained encoder and
tokenizer, building the model, loading the checkpoint, tokenising, the forward passes, the rest), for this source
tree and, with ``--baseline-src``, for another one (e.g. the code before a change), on the same run directory.

The run: ``ft-reviews`` (MiniLM, 500 validation and 1,000 test reviews, ``max_length`` 48) trained for one epoch on
64 reviews (the speed of a forward pass does not depend on how well the model was trained), or ``--run DIR``. The
texts: 1,000 clothing reviews from the dataset registry (line breaks inside a review replaced by spaces).

    python benchmarks/text_predict_speed.py --rounds 3 --commands 5 [--baseline-src /path/to/old/src]

writes ``docs/results/text-predict-speed/text-predict-speed.json``, ``README.md`` and ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "text-predict-speed"
SRC = Path(__file__).resolve().parents[1] / "src"
BATCH = 256  # texts per batch: what predict tokenises and runs together
TARGET = 0.8
TRAIN = [
    "data.train_size=64",
    "train.epochs=1",
    "train.keep_checkpoints=best",
    "train.progress=false",
    "train.device=cpu",
]

PHASES_SCRIPT = r"""
import json, sys, time
start = time.perf_counter()
times = {}
import embreg.cli, embreg.serving
times["start-up imports (python, torch, embreg)"] = time.perf_counter() - start
mark = time.perf_counter()
import transformers
from transformers import BertModel
times["transformers + BERT modelling imports"] = time.perf_counter() - mark
mark = time.perf_counter()
from embreg.registry import load_builtins
load_builtins()
times["registry (every embreg module)"] = time.perf_counter() - mark

import embreg.models.encoder_classifier as ec
import embreg.models.pretrained as pretrained
import embreg.recipes.run as recipe_run
import embreg.serving.predicting as predicting
from embreg.tasks.text.task import TextClassificationTask
from embreg.runs.run_dir import RunDirectory

stack = []
exclusive = {}

def timed(label, fn):
    def wrapper(*args, **kwargs):
        stack.append([time.perf_counter(), 0.0])
        try:
            return fn(*args, **kwargs)
        finally:
            begun, children = stack.pop()
            spent = time.perf_counter() - begun
            exclusive[label] = exclusive.get(label, 0.0) + spent - children
            if stack:
                stack[-1][1] += spent
    return wrapper

WRAPPED = [
    (TextClassificationTask, "prepare", "data: read and tokenise the run's data set"),
    (TextClassificationTask, "serving_data", "data: the run's records (serving.json)"),
    (pretrained, "load_pretrained", "pretrained encoder (from_pretrained)"),
    (pretrained, "load_tokenizer", "tokenizer"),
    (recipe_run, "build_run", "model build (the rest of build_run: seeding, the model's own layers)"),
    (RunDirectory, "load_checkpoint", "checkpoint load"),
    (ec, "encode_texts", "tokenising (encode_texts)"),
    (predicting, "encode_for_prediction", "tokenising the input texts"),
    (predicting, "_outputs", "forward passes"),
]
for owner, name, label in WRAPPED:
    if hasattr(owner, name):
        setattr(owner, name, timed(label, getattr(owner, name)))
mark = time.perf_counter()
code = embreg.cli.main(sys.argv[1:])
command = time.perf_counter() - mark
times.update(exclusive)
times["the rest of the command (reading, writing, vocabularies)"] = command - sum(exclusive.values())
times["total"] = time.perf_counter() - start
print("PHASES " + json.dumps({"code": code, "seconds": times}))
"""


def _median_pair(a: Any, b: Any, rounds: int) -> tuple[float, float]:
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for side, fn in enumerate((a, b)):
            start = time.perf_counter()
            fn()
            times[side].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def review_texts(count: int) -> list[str]:
    """``count`` clothing reviews (from the end of the table: outside a 64-review training set)."""
    from embreg.data.datasets.reviews import read_reviews

    texts = [" ".join(str(t).split()) for t in read_reviews()["text"].tolist()]
    texts = [t for t in texts if t]
    return texts[-count:]


def train_run(root: Path) -> Path:
    from embreg.recipes import load_recipe
    from embreg.recipes.run import run_single

    out = root / "ft-reviews"
    run_single(load_recipe("ft-reviews", TRAIN), out)
    return out


def throughput(run_dir: Path, texts: list[str], root: Path, rounds: int) -> dict[str, Any]:
    """Texts per second of the command (in-process) and of the bare loop, on the same texts."""
    import contextlib
    import io

    import embreg
    from embreg.cli import main
    from embreg.models.pretrained import load_tokenizer

    source = root / "texts.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = root / "predicted.csv"
    run = embreg.load(run_dir)
    tokenizer = load_tokenizer(run.recipe.model.pretrained, progress=False)
    max_length = run.recipe.data.max_length

    def command() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["predict", str(run_dir), "--input", str(source), "--out", str(out)]) == 0

    @torch.no_grad()
    def bare() -> None:
        for start in range(0, len(texts), BATCH):
            batch = tokenizer(
                texts[start : start + BATCH],
                truncation=True,
                max_length=max_length,
                padding="longest",
                return_tensors="pt",
            )
            run.model(dict(batch))

    command()  # warm-up: imports and first-call costs are not per-command costs of a running process
    bare()
    command_s, bare_s = _median_pair(command, bare, rounds)
    return {
        "texts": len(texts),
        "command_s": command_s,
        "bare_s": bare_s,
        "command_texts_per_s": len(texts) / command_s,
        "bare_texts_per_s": len(texts) / bare_s,
        "ratio": bare_s / command_s,
    }


def warm_fixed_cost(run_dir: Path, texts: list[str], root: Path, rounds: int) -> float:
    """Median seconds of the in-process command on 4 texts (imports done): loading and writing, per command."""
    import contextlib
    import io

    from embreg.cli import main

    source = root / "four.txt"
    source.write_text("\n".join(texts[:4]) + "\n", encoding="utf-8")
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["predict", str(run_dir), "--input", str(source), "--out", str(root / "four.csv")]) == 0
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def phases(src: Path, run_dir: Path, texts: list[str], root: Path, commands: int, threads: int) -> dict[str, Any]:
    """Wall seconds of whole ``embreg predict`` processes on 4 texts with the code in ``src`` (median of
    ``commands``), each phase the median of its exclusive seconds (a phase inside another is not counted twice)."""
    source = root / "four.txt"
    source.write_text("\n".join(texts[:4]) + "\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS=str(threads))
    walls, readings = [], []
    for _ in range(commands):
        start = time.perf_counter()
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                PHASES_SCRIPT,
                "predict",
                str(run_dir),
                "--input",
                str(source),
                "--out",
                str(root / "four.csv"),
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        walls.append(time.perf_counter() - start)
        line = [x for x in result.stdout.splitlines() if x.startswith("PHASES ")]
        if result.returncode != 0 or not line:
            raise RuntimeError(f"embreg predict failed with {src}: {result.stderr[-2000:]}")
        readings.append(json.loads(line[0][len("PHASES ") :])["seconds"])
    labels = list(dict.fromkeys(label for reading in readings for label in reading))
    return {
        "src": str(src),
        "wall_s": statistics.median(walls),
        "phases_s": {label: statistics.median(r.get(label, 0.0) for r in readings) for label in labels},
        "stderr_bars": "Loading weights" in result.stderr,
    }


def write_page(out: Path, record: dict[str, Any]) -> None:
    t = record["throughput"]
    verdict = "met" if t["ratio"] >= TARGET else "not met"
    lines = [
        "# embreg predict on a fine-tuned MiniLM: texts per second and the fixed cost of a command",
        "",
        f"Run: `ft-reviews` (all-MiniLM-L6-v2, `max_length` {record['max_length']}) trained one epoch on 64 "
        f"reviews; input: {t['texts']:,} clothing reviews. CPU, {record['machine']['threads']} thread(s); "
        f"{record['rounds']} interleaved rounds (medians).",
        "",
        "| path | seconds for the texts | texts/s | ratio to the bare loop | target |",
        "|---|---|---|---|---|",
        f"| bare loop: tokenizer + `model(batch)` per {BATCH} texts, model loaded | {t['bare_s']:.2f} | "
        f"{t['bare_texts_per_s']:.1f} | 1.00x | |",
        f"| `embreg predict` in-process (load, read, predict, write) | {t['command_s']:.2f} | "
        f"{t['command_texts_per_s']:.1f} | {t['ratio']:.2f}x | >= {TARGET}x ({verdict}) |",
        "",
        f"Fixed cost in a running process (4 texts, imports done): {record['warm_fixed_cost_s']:.2f} s per command.",
        "",
        "## A whole `embreg predict` process on 4 texts",
        "",
    ]
    trees = record["commands"]
    header = " | ".join(f"`{name}` (s)" for name in trees)
    lines += [f"| phase | {header} |", "|---|" + "---|" * len(trees)]
    labels = list(dict.fromkeys(label for tree in trees.values() for label in tree["phases_s"]))
    for label in labels:
        cells = " | ".join(
            f"{tree['phases_s'][label]:.2f}" if label in tree["phases_s"] else "-" for tree in trees.values()
        )
        lines.append(f"| {label} | {cells} |")
    walls = " | ".join(f"**{tree['wall_s']:.2f}**" for tree in trees.values())
    bars = " | ".join("yes" if tree["stderr_bars"] else "no" for tree in trees.values())
    lines += [
        f"| wall time of the process (median of {record['commands_per_tree']}) | {walls} |",
        f'| Hugging Face "Loading weights" bars on stderr | {bars} |',
        "",
        "Phases are exclusive (a tokenizer load inside the model build counts once, under its own row); `-`: the "
        "code has no such step. `this tree` is the code of this commit; another column is the `--baseline-src` "
        "tree, run on the same run directory.",
        "",
        f"Machine: {record['machine']['cpus']} CPU cores ({record['machine']['platform']}), torch "
        f"{record['machine']['torch']}; a shared machine (load averages before and after the run: "
        f"`{record['machine']['load']}`, `{record['machine']['load_after']}`). Command: "
        f"`{record['command']}` (raw numbers: `text-predict-speed.json`).",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def write_summary(out: Path, record: dict[str, Any]) -> None:
    from embreg.studies.hub import write_benchmark_summary

    t = record["throughput"]
    here = record["commands"]["this tree"]
    before = record["commands"].get("baseline")
    baseline = f" ({before['wall_s']:.1f} s with the baseline tree)" if before else ""
    claims = [
        {
            "claim": f"`embreg predict` on 1,000 texts (fine-tuned MiniLM) reaches >= {TARGET}x the texts/s of a bare "
            "model loop",
            "reading": f"{t['ratio']:.2f}x ({t['command_texts_per_s']:.1f} vs {t['bare_texts_per_s']:.1f} texts/s); "
            f"a whole command on 4 texts: {here['wall_s']:.1f} s{baseline}",
            "verdict": "met" if t["ratio"] >= TARGET else "not met",
            "p": None,
        }
    ]
    write_benchmark_summary(
        out,
        "text-predict-speed",
        "embreg predict on a fine-tuned MiniLM: texts per second and the fixed cost of a command",
        "lnsr-noise-stability-bert.txt",
        claims,
        record["machine"],
        record["command"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the 1,000-text ratio")
    parser.add_argument("--commands", type=int, default=5, help="whole predict processes timed per source tree")
    parser.add_argument("--texts", type=int, default=1000, help="texts of the throughput ratio")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--run", help="a trained classification run to use (default: train ft-reviews briefly)")
    parser.add_argument("--baseline-src", help="another source tree to time the whole command with")
    parser.add_argument("--out", default=str(RESULTS), help="results folder (default: %(default)s)")
    parser.add_argument("--summary-only", action="store_true", help="rebuild the page and summary from the JSON")
    args = parser.parse_args()
    if args.summary_only:
        stored = json.loads((Path(args.out) / "text-predict-speed.json").read_text())
        write_page(Path(args.out), stored)
        write_summary(Path(args.out), stored)
        return
    torch.set_num_threads(args.threads)
    command = f"python benchmarks/text_predict_speed.py --rounds {args.rounds} --commands {args.commands}"
    if args.run:
        command += " --run RUN"
    if args.baseline_src:
        command += " --baseline-src OLD/src"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run_dir = Path(args.run) if args.run else train_run(root)
        texts = review_texts(args.texts)
        trees = {"this tree": SRC} | ({"baseline": Path(args.baseline_src)} if args.baseline_src else {})
        commands = {name: phases(src, run_dir, texts, root, args.commands, args.threads) for name, src in trees.items()}
        import embreg

        record = {
            "command": command,
            "rounds": args.rounds,
            "commands_per_tree": args.commands,
            "max_length": embreg.load(run_dir).recipe.data.max_length,
            "machine": {
                "cpus": os.cpu_count(),
                "threads": args.threads,
                "platform": platform.platform(),
                "torch": torch.__version__,
                "load": load,
            },
            "throughput": throughput(run_dir, texts, root, args.rounds),
            "warm_fixed_cost_s": warm_fixed_cost(run_dir, texts, root, args.commands),
            "commands": commands,
        }
    record["machine"]["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "text-predict-speed.json").write_text(json.dumps(record, indent=2) + "\n")
    write_page(out, record)
    write_summary(out, record)
    print((out / "README.md").read_text())


if __name__ == "__main__":
    main()

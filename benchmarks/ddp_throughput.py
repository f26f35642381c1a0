"""Data-parallel throughput of ``embreg run`` on the SYNTHETIC Criteo-like CTR data: 2 gloo ranks vs 1 process.

Target: 2 ranks / 1 rank throughput >= 1.6x on the CPU (gloo) at batch >= 4096, data >= 10^7 rows.

Each configuration is one real ``embreg run ctr-synthetic`` (DLRM with mixed-dimension tables, one epoch, batch
``--batch-size`` per process) on ``--rows`` generated rows (80 % of them train):

* ``1 rank x 1 thread``   ``embreg run`` in one process with ``train.threads=1``: one core;
* ``2 ranks x 1 thread``  ``torchrun --nproc_per_node=2 --no-python embreg run ...``, one thread each: two cores;
* ``1 rank x 2 threads``  one process with ``train.threads=2``: the same two cores through intra-op threads (the
  alternative a user of one process has).

Throughput is training examples per second of training time (``train_seconds`` of ``metrics.json``: the epochs'
time without evaluation). The configurations run one after the other, ``--repeats`` times in turn (A B C A B C ...),
and the ratio of the median throughputs is reported; the target compares 2 ranks with 1 rank x 1 thread (DDP's
scaling over processes at the same work per core).

    python benchmarks/ddp_throughput.py --rows 10000000 --batch-size 4096 --repeats 2

writes ``docs/results/ddp-throughput/`` (``ddp-throughput.json``, ``summary.json``, ``README.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from embreg.studies.hub import write_benchmark_summary

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "ddp-throughput"
CONFIGS = {  # name -> (processes, threads per process)
    "1 rank x 1 thread": (1, 1),
    "2 ranks x 1 thread": (2, 1),
    "1 rank x 2 threads": (1, 2),
}
TARGET = 1.6


def command(processes: int, threads: int, rows: int, batch_size: int, out: Path) -> list[str]:
    """The ``embreg run`` (or ``torchrun ... embreg run``) command line of one configuration."""
    bindir = Path(sys.executable).parent
    embreg = str(bindir / "embreg")
    base = [embreg, "run", "ctr-synthetic", "--out", str(out)]
    for override in (
        f"data.synthetic_rows={rows}",
        "train.epochs=1",
        f"train.batch_size={batch_size}",
        f"train.threads={threads}",
        "train.progress=false",
        "train.keep_checkpoints=none",
    ):
        base += ["--set", override]
    if processes == 1:
        return base
    return [str(bindir / "torchrun"), f"--nproc_per_node={processes}", "--no-python", *base]


def run_config(processes: int, threads: int, rows: int, batch_size: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        started = time.perf_counter()
        done = subprocess.run(
            command(processes, threads, rows, batch_size, out), capture_output=True, text=True, env=env, cwd=tmp
        )
        if done.returncode != 0:
            raise RuntimeError(f"{processes} x {threads}: embreg run failed:\n{done.stderr[-4000:]}")
        metrics = json.loads((out / "metrics.json").read_text())
        split = json.loads((out / "split.json").read_text()) if (out / "split.json").exists() else {}
    train_examples = split.get("sizes", {}).get("train") or int(round(rows * 0.8))
    return {
        "train_seconds": metrics["train_seconds"],
        "examples_per_second": train_examples / metrics["train_seconds"],
        "wall_seconds": time.perf_counter() - started,
        "val_auc": metrics.get("val_auc"),
        "world_size": metrics.get("world_size", 1),
    }


def _margin(report: dict) -> str:
    if report["repeats"] > 1 or abs(report["ratio"] - TARGET) > 0.2:
        return ""
    return f'With one run per configuration and a reading near {TARGET}x, read the verdict as "about {TARGET}x".'


def write_page(report: dict, out: Path) -> None:
    rows = "\n".join(
        f"| {name} | {r['median_examples_per_second']:,.0f} | "
        f"{' / '.join(f'{x:,.0f}' for x in r['examples_per_second'])} | {r['ratio_to_one_rank']:.2f}x | "
        f"{r['val_auc'][0]:.4f} |"
        for name, r in report["configs"].items()
    )
    ratio = report["ratio"]
    verdict = "met" if ratio >= TARGET else "not met"
    page = f"""# Data-parallel throughput: 2 gloo ranks vs 1 process (SYNTHETIC Criteo-like data)

`embreg run ctr-synthetic` (DLRM, mixed-dimension tables, alpha 0.3) for one epoch on {report["rows"]:,} SYNTHETIC
rows (26 Zipf categorical fields, 13 dense; 80 % train), batch {report["batch_size"]} per process, Adam.
Throughput = training examples / training seconds (evaluation excluded); each configuration ran
{report["repeats"]} time(s), the configurations in turn; medians. {_margin(report)}

| configuration | examples/s (median) | each run | vs 1 rank x 1 thread | val AUC |
|---|---|---|---|---|
{rows}

**Target: 2 ranks / 1 rank >= {TARGET}x at batch >= 4096 — {verdict}: {ratio:.2f}x.**
One process with both cores as intra-op threads reaches {report["threads_ratio"]:.2f}x; two ranks give
{report["ranks_vs_threads"]:.2f}x of that.

The two ranks train disjoint halves of each epoch and average their gradients through DDP (gloo all-reduce of the
dense gradients: the MD tables' rows and projections, the MLPs); rank 0 alone evaluates, once per epoch.
Validation AUC differs between configurations because two ranks take half as many steps with twice the examples
per step (the global batch is 2 x {report["batch_size"]}), at the same learning rate.

Machine: {report["machine"]["cpus"]} CPU cores ({report["machine"]["processor"] or report["machine"]["platform"]}),
torch {report["machine"]["torch"]}; a shared machine, so each run's wall clock includes whatever else ran.
Command: `{report["command"]}` (raw numbers: `ddp-throughput.json`).
"""
    (out / "README.md").write_text(page)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if shutil.which("torchrun", path=str(Path(sys.executable).parent)) is None:
        sys.exit("torchrun is not installed beside this Python")
    results: dict[str, list[dict]] = {name: [] for name in CONFIGS}
    for repeat in range(args.repeats):
        for name, (processes, threads) in CONFIGS.items():
            print(f"[{repeat + 1}/{args.repeats}] {name} ...", flush=True)
            results[name].append(run_config(processes, threads, args.rows, args.batch_size))
            print(f"    {results[name][-1]['examples_per_second']:,.0f} examples/s", flush=True)
    medians = {name: statistics.median(r["examples_per_second"] for r in runs) for name, runs in results.items()}
    base = medians["1 rank x 1 thread"]
    configs = {
        name: {
            "processes": CONFIGS[name][0],
            "threads": CONFIGS[name][1],
            "examples_per_second": [r["examples_per_second"] for r in runs],
            "median_examples_per_second": medians[name],
            "ratio_to_one_rank": medians[name] / base,
            "val_auc": [r["val_auc"] for r in runs],
            "runs": runs,
        }
        for name, runs in results.items()
    }
    cmd = f"python benchmarks/ddp_throughput.py --rows {args.rows} --batch-size {args.batch_size} --repeats {args.repeats}"
    report = {
        "rows": args.rows,
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "configs": configs,
        "ratio": medians["2 ranks x 1 thread"] / base,
        "threads_ratio": medians["1 rank x 2 threads"] / base,
        "ranks_vs_threads": medians["2 ranks x 1 thread"] / medians["1 rank x 2 threads"],
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "processor": platform.processor(),
            "torch": torch.__version__,
        },
        "command": cmd,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ddp-throughput.json").write_text(json.dumps(report, indent=1) + "\n")
    write_page(report, args.out)
    ok = report["ratio"] >= TARGET
    write_benchmark_summary(
        args.out,
        "ddp-throughput",
        "Data-parallel throughput of embreg run: 2 gloo ranks vs 1 process (SYNTHETIC CTR data)",
        "mixed-dimension-embeddings.txt",  # DLRM with MD tables: the models MD exists to scale
        [
            {
                "claim": f"2 ranks / 1 rank throughput >= {TARGET}x on the CPU (gloo), batch {args.batch_size}, "
                f"{args.rows:,} rows",
                "reading": f"{report['ratio']:.2f}x",
                "verdict": "met" if ok else "not met",
                "p": None,
            }
        ],
        {**report["machine"], "threads": "1 per rank"},
        cmd,
    )
    print(
        f"2 ranks / 1 rank: {report['ratio']:.2f}x (target {TARGET}x); 1 rank x 2 threads: {report['threads_ratio']:.2f}x"
    )


if __name__ == "__main__":
    main()

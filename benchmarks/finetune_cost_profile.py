"""Where a fine-tuning step's time goes: matrix products versus the rest, per method (torch.profiler, CPU).

Explains the step-time ratios of ``finetune_cost.py``: LNSR with ``b = 1`` and R3F run layers ``b..L`` once more,
forward and backward, so their extra matrix-product time (``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``) is fixed
by the method itself. ``1 + (matmul_method - matmul_FT) / step_FT`` is then a lower bound on the ratio that no
implementation change keeping the method (the extra pass, gradients through both passes) can beat. The rest of the
step (dropout masks, element-wise work, optimizer) is listed by category.

Same batch and steps as ``finetune_cost.py`` (all-MiniLM-L6-v2, batch 32 x 64 tokens, AdamW); methods are profiled
in interleaved rounds, one step each per round.

    python benchmarks/finetune_cost_profile.py --rounds 3 --threads 1

writes ``docs/results/finetune-cost-profile/finetuning-stability-profile.json``, the markdown table as that
folder's ``README.md``, and rebuilds its ``summary.json`` (``--out-dir``: another folder).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from embreg.models import EncoderClassifier
from embreg.studies.hub import write_benchmark_summary


def _sibling(name: str):
    """A script next to this one, loaded by path (``benchmarks`` is no package)."""
    spec = importlib.util.spec_from_file_location(f"_{name}", Path(__file__).resolve().with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_cost = _sibling("finetune_cost")
TARGETS, Runner, _batch = _cost.TARGETS, _cost.Runner, _cost._batch

MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
DROPOUT_RNG = {"aten::bernoulli_", "aten::bernoulli", "aten::native_dropout"}
OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "finetune-cost-profile"


def profile_step(runner: Runner) -> dict[str, float]:
    """Self CPU seconds of one step by category, and the step's wall time."""
    started = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        runner.step()
    wall = time.perf_counter() - started
    parts = {"matmul": 0.0, "dropout_rng": 0.0, "other": 0.0}
    optimizer = 0.0
    for event in prof.key_averages():
        seconds = event.self_cpu_time_total / 1e6
        if event.key in MATMUL:
            parts["matmul"] += seconds
        elif event.key in DROPOUT_RNG:
            parts["dropout_rng"] += seconds
        else:
            parts["other"] += seconds
        if event.key.startswith("Optimizer.step"):
            optimizer = event.cpu_time_total / 1e6
    return parts | {"optimizer_step": optimizer, "profiled_total": sum(parts.values()), "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--methods", default="FT,R3F,LNSR (b=1),LNSR,SMART")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--out-dir", type=Path, default=OUT, help="output folder (default: %(default)s)")
    args = parser.parse_args()
    methods = args.methods.split(",")
    if "FT" not in methods:
        methods.insert(0, "FT")  # every ratio is to plain fine-tuning
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base, tokenizer = EncoderClassifier.from_pretrained("all-minilm-l6-v2", 2)
    batch = _batch(args.batch_size, args.max_length, tokenizer)
    runners = {name: Runner(base, name, batch) for name in methods}
    for runner in runners.values():
        runner.step()  # warm-up
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in methods}
    for _ in range(args.rounds):
        for name, runner in runners.items():
            samples[name].append(profile_step(runner))
    keys = ["wall", "profiled_total", "matmul", "dropout_rng", "optimizer_step", "other"]
    rows = {name: {k: statistics.median(s[k] for s in samples[name]) for k in keys} for name in methods}
    ft = rows["FT"]
    for name, row in rows.items():
        row["ratio_to_FT"] = row["profiled_total"] / ft["profiled_total"]
        row["matmul_share"] = row["matmul"] / row["profiled_total"]
        row["matmul_lower_bound_ratio"] = 1 + (row["matmul"] - ft["matmul"]) / ft["profiled_total"]
        row["target"] = TARGETS.get(name)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    machine = f"{platform.machine()}, {args.threads} torch thread(s), torch {torch.__version__}, load average {load}"
    command = "python benchmarks/finetune_cost_profile.py " + " ".join(
        f"'{a}'" if " " in a else a for a in sys.argv[1:]
    )
    record = {"command": command, "machine": machine, "rounds": args.rounds, "methods": rows, "samples": samples}
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "finetuning-stability-profile.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# Fine-tuning regularisers: where the step time goes",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}; all-MiniLM-L6-v2, batch {args.batch_size} x {args.max_length} tokens, AdamW, one "
        f"full step; median over {args.rounds} interleaved profiled steps per method (torch.profiler self CPU "
        "time).",
        "",
        "| method | step (s, profiled) | ratio to FT | matmul (s) | matmul share | dropout masks (s) | "
        "optimizer (s) | other (s) | matmul-only lower bound on the ratio | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        target = f"<= {r['target']}x" if r["target"] else "—"
        lines.append(
            f"| {name} | {r['profiled_total']:.2f} | {r['ratio_to_FT']:.2f} | {r['matmul']:.2f} | "
            f"{r['matmul_share']:.0%} | {r['dropout_rng']:.2f} | {r['optimizer_step']:.2f} | "
            f"{r['other']:.2f} | {r['matmul_lower_bound_ratio']:.2f} | {target} |"
        )
    lines += [
        "",
        "The lower bound counts only the extra matrix products a method's definition requires (its extra "
        "forward and backward through layers b..L); every other part of the step would have to cost nothing "
        "to reach it.",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))  # the folder's page is the table
    # an explanation of finetune-cost's ratios; the cost targets are claimed there
    write_benchmark_summary(
        out,
        "finetune-cost-profile",
        "Profile of the LNSR / R3F / SMART fine-tuning step",
        "lnsr-noise-stability-bert.txt",
        [],
        {"description": machine},
        command,
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()

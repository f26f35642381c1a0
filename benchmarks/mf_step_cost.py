"""Cost of SSE inside MF training on MovieLens-100k: step-time ratios and epoch time, measured in one run.

Targets: an MF step with SSE on both tables costs <= 1.05x the plain step (SSE-SE and SSE-Graph);
an MF epoch (batch 1024, d=64) takes under 2 seconds on 2 cores.

All variants train one shared model and take turns step by step (plain, SSE-SE, SSE-Graph, ..., plain, ...; the
order rotates every round so that no variant always follows the same one), so drifts in machine load hit all of
them alike; every step is timed on its own and the ratio of the median step
times is reported. SSE runs twice: with the fused C++ CPU kernel
(``EMBREG_SSE_KERNEL=on``, the default backend when it builds) and with the tensor-op samplers (``off``).

    python benchmarks/mf_step_cost.py --threads 2 --rounds 40 --steps 20 --epochs 10 --dim 64 --batch-size 1024

writes ``docs/results/mf-step-cost/mf-step-cost.json`` (``--out-json``) and rebuilds ``summary.json`` in the same folder
from every ``mf-step-cost*.json`` there (one claim set per batch size).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import time
from pathlib import Path

import torch

from embreg.optim.optimizers import optimizer_factory
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from embreg.studies.hub import write_benchmark_summary

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "mf-step-cost"
SSE_SE = ["index_transforms.user={name: sse-se, p: 0.01}", "index_transforms.item={name: sse-se, p: 0.01}"]
# SSE-Graph on items (ML-100k knowledge graph, rho 100), SSE-SE on users (users have no graph)
SSE_GRAPH = [
    "index_transforms.user={name: sse-se, p: 0.01}",
    "index_transforms.item={name: sse-graph, p: 0.01, rho: 100.0, graph: kg}",
]
VARIANTS = {  # name -> (recipe overrides, SSE CPU backend: EMBREG_SSE_KERNEL while the variant's steps run)
    "plain": ([], "off"),
    "sse-se": (SSE_SE, "on"),
    "sse-graph": (SSE_GRAPH, "on"),
    "sse-se (tensor ops)": (SSE_SE, "off"),
    "sse-graph (tensor ops)": (SSE_GRAPH, "off"),
}


def make_steps(dim: int, batch_size: int) -> tuple[dict, list]:
    """One step function per variant, all training ONE shared MF model (same tables, optimizer and batches).

    A variant only swaps the model's user/item index transforms in before its step, so the timed difference is
    the SSE sampling and nothing else (separate model instances differ by a few percent on their own).
    """
    base = [f"model.dim={dim}", f"train.batch_size={batch_size}", "model.l2=0.05"]
    built = build_run(load_recipe("mf", base))
    data, model = built.prepared, built.model
    model.train()
    optimizer = optimizer_factory("adam", 1e-3)(model.parameters())
    epoch_batches = list(built.batches.epoch(0))
    steps = {}
    for name, (overrides, backend) in VARIANTS.items():
        variant = build_run(load_recipe("mf", base + overrides), data).model
        variant.train()

        def step(batch, transforms=(variant.user_transform, variant.item_transform), backend=backend):
            os.environ["EMBREG_SSE_KERNEL"] = backend
            model.user_transform, model.item_transform = transforms
            optimizer.zero_grad(set_to_none=True)
            loss = model.loss(batch, model(batch))
            loss.backward()
            optimizer.step()

        steps[name] = (step, epoch_batches)
    return steps, epoch_batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds of steps per variant")
    parser.add_argument("--steps", type=int, default=20, help="steps per variant per round")
    parser.add_argument("--epochs", type=int, default=5, help="full epochs timed per variant")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument(
        "--out-json",
        default=str(RESULTS / "mf-step-cost.json"),
        help="JSON record; summary.json is rebuilt in its folder (default: %(default)s)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    steps, batches = make_steps(args.dim, args.batch_size)
    for step, batches in steps.values():  # warm-up
        for batch in batches[:10]:
            step(batch)
    per_step = {name: [] for name in VARIANTS}
    for r in range(args.rounds):
        chosen = batches[(r * args.steps) % len(batches) :][: args.steps]
        names = list(steps)
        names = names[r % len(names) :] + names[: r % len(names)]  # rotate, so no variant always follows the same one
        for batch in chosen:  # variants take turns step by step; each step is timed on its own
            for name in names:
                step = steps[name][0]
                started = time.perf_counter()
                step(batch)
                per_step[name].append(time.perf_counter() - started)
    epoch_seconds = {name: [] for name in VARIANTS}
    for _ in range(args.epochs):
        for name, (step, batches) in steps.items():
            started = time.perf_counter()
            for batch in batches:
                step(batch)
            epoch_seconds[name].append(time.perf_counter() - started)

    median_step = {name: statistics.median(v) for name, v in per_step.items()}
    result = {
        "command": "python benchmarks/mf_step_cost.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out_json"),
        "machine": {
            "cpus": os.cpu_count(),
            "threads": args.threads,
            "platform": platform.platform(),
            "torch": torch.__version__,
        },
        "median_step_ms": {k: v * 1e3 for k, v in median_step.items()},
        "step_ratio_vs_plain": {k: v / median_step["plain"] for k, v in median_step.items()},
        "median_epoch_seconds": {k: statistics.median(v) for k, v in epoch_seconds.items()},
        "batches_per_epoch": len(steps["plain"][1]),
        "batch_size": args.batch_size,
    }
    print("| variant | median step (ms) | step / plain step | median epoch (s) |")
    print("|---|---|---|---|")
    for name in VARIANTS:
        print(
            f"| {name} | {result['median_step_ms'][name]:.3f} | {result['step_ratio_vs_plain'][name]:.3f} | "
            f"{result['median_epoch_seconds'][name]:.3f} |"
        )
    if args.out_json:
        out = Path(args.out_json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, sort_keys=True))
        write_summary(out.parent)
        print(f"wrote {out} and {out.parent / 'summary.json'}")


def _batch_size(record: dict) -> int:
    if "batch_size" in record:
        return int(record["batch_size"])
    found = re.search(r"--batch-size (\d+)", record.get("command", ""))
    return int(found.group(1)) if found else 1024


def write_summary(folder: Path) -> None:
    """Rebuilds ``folder/summary.json`` from every ``mf-step-cost*.json`` there (the batch-1024 run leads)."""
    records = [json.loads(p.read_text()) for p in sorted(folder.glob("mf-step-cost*.json"))]
    if not records:
        return
    records.sort(key=lambda r: (_batch_size(r) != 1024, _batch_size(r)))
    claims = []
    for record in records:
        bs, ms, ratio = _batch_size(record), record["median_step_ms"], record["step_ratio_vs_plain"]
        for variant in ("sse-se", "sse-graph"):
            claims.append(
                {
                    "claim": f"An MF step with {variant.upper()} on both tables costs <= 1.05x the plain step, "
                    f"batch {bs}",
                    "reading": f"median step {ms[variant]:.2f} ms vs {ms['plain']:.2f} ms: {ratio[variant]:.2f}x",
                    "verdict": "met" if ratio[variant] <= 1.05 else "not met",
                    "p": None,
                }
            )
    main_run = records[0]
    if _batch_size(main_run) == 1024:
        slowest = max(main_run["median_epoch_seconds"].values())
        claims.append(
            {
                "claim": "An MF epoch (batch 1024, d = 64) takes under 2 s on 2 cores",
                "reading": f"slowest median epoch {slowest:.2f} s",
                "verdict": "met" if slowest < 2 else "not met",
                "p": None,
            }
        )
    write_benchmark_summary(
        folder,
        "mf-step-cost",
        "Cost of SSE inside an MF training step",
        "sse-stochastic-shared-embeddings.txt",
        claims,
        main_run["machine"],
        main_run["command"],
    )


if __name__ == "__main__":
    main()

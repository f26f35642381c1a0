"""Throughput of the vectorised SSE samplers against a naive per-id Python loop.

Measures ids/s of SSE-SE (eq. 5) and SSE-Graph (eq. 3) of
sse-stochastic-shared-embeddings.txt on CPU, for a batch of ids drawn uniformly
from the table, on (a) a synthetic graph shaped like the MovieLens-100k item
graph (N = 1682, average degree about 120) and (b) optionally a real graph
given as an (E, 2) integer ``.npy`` edge array. Each sampler is timed with both
CPU backends in one run: the fused C++ kernel (``EMBREG_SSE_KERNEL=on``) and the
tensor-op samplers (``off``). Prints a markdown table and writes JSON with the
machine, the command and every timing.

Example (writes ``docs/results/sse-speed/sse-speed.json`` and ``sse-speed-table.md``, the defaults):
    python benchmarks/sse_speed.py --ml100k-kg --p 0.01 0.1 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embreg.sse import NeighbourGraph
from embreg.sse import functional as F

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "sse-speed"

TARGET_SE_IDS_PER_S = 20e6
TARGET_GRAPH_IDS_PER_S = 5e6
TARGET_LOOP_SPEEDUP = 100.0


def synthetic_graph(num_nodes: int, average_degree: float, seed: int) -> NeighbourGraph:
    """A uniform random simple graph with ``num_nodes * average_degree / 2`` distinct edges."""
    rows, cols = np.triu_indices(num_nodes, k=1)
    num_edges = min(int(round(num_nodes * average_degree / 2)), rows.size)
    chosen = np.random.default_rng(seed).choice(rows.size, size=num_edges, replace=False)
    return NeighbourGraph.from_edges(np.stack([rows[chosen], cols[chosen]], axis=1), num_nodes)


def loop_sse_se(ids: torch.Tensor, num_embeddings: int, p: float, rng: random.Random) -> torch.Tensor:
    """Reference: the obvious per-id Python loop for eq. 5."""
    out = []
    for j in ids.tolist():
        if rng.random() < p:
            k = rng.randrange(num_embeddings - 1)
            j = k + 1 if k >= j else k
        out.append(j)
    return torch.tensor(out, dtype=ids.dtype)


def loop_sse_graph(
    ids: torch.Tensor,
    neighbours: list[list[int]],
    neighbour_sets: list[set[int]],
    p: float,
    rho: float,
    rng: random.Random,
) -> torch.Tensor:
    """Reference: the obvious per-id Python loop for eq. 3 (rejection sampling for non-neighbours)."""
    n = len(neighbours)
    out = []
    for j in ids.tolist():
        if rng.random() < p:
            degree = len(neighbours[j])
            if rng.random() < rho * degree / (rho * degree + n - 1 - degree):
                j = rng.choice(neighbours[j])
            else:
                own = j
                while j == own or j in neighbour_sets[own]:
                    j = rng.randrange(n)
        out.append(j)
    return torch.tensor(out, dtype=ids.dtype)


def round_robin_timings(calls: dict[str, Callable[[], Any]], reps: int, warmup: int) -> dict[str, list[float]]:
    """Wall times of ``reps`` runs of each call, taken in turn, after ``warmup`` untimed rounds.

    Taking the calls in turn spreads any interference from other processes on a
    shared machine over all of them, so their ratio stays fair.
    """
    for _ in range(warmup):
        for call in calls.values():
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return times


def with_backend(backend: str, call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` run with ``EMBREG_SSE_KERNEL`` set to ``on`` (cpp) or ``off`` (torch)."""

    def run() -> Any:
        os.environ["EMBREG_SSE_KERNEL"] = "on" if backend == "cpp" else "off"
        return call()

    return run


def bench_graph(
    name: str, graph: NeighbourGraph, args: argparse.Namespace, generator: torch.Generator
) -> list[dict[str, Any]]:
    """Time SSE-SE and SSE-Graph (vectorised and loop) on one graph for every p."""
    n = graph.num_nodes
    ids = torch.randint(0, n, (args.batch,), generator=generator)
    loop_ids = ids[: args.loop_batch]
    neighbours = [graph.neighbours(j).tolist() for j in range(n)]
    neighbour_sets = [set(row) for row in neighbours]
    rng = random.Random(args.seed)
    rows = []
    for p in args.p:
        calls: dict[str, Callable[[], Any]] = {}
        for backend in args.backends:
            calls[f"se:{backend}"] = with_backend(backend, lambda p=p: F.sse_se(ids, n, p, generator))
            calls[f"graph:{backend}"] = with_backend(
                backend, lambda p=p: F.sse_graph(ids, graph, p, args.rho, generator)
            )
        calls["loop_se"] = lambda p=p: loop_sse_se(loop_ids, n, p, rng)
        calls["loop_graph"] = lambda p=p: loop_sse_graph(loop_ids, neighbours, neighbour_sets, p, args.rho, rng)
        times = round_robin_timings(calls, args.reps, args.warmup)
        for (sampler, key, target), backend in (
            (variant, backend)
            for variant in (("SSE-SE", "se", TARGET_SE_IDS_PER_S), ("SSE-Graph", "graph", TARGET_GRAPH_IDS_PER_S))
            for backend in args.backends
        ):
            vectorised, loop = times[f"{key}:{backend}"], times[f"loop_{key}"]
            ids_per_s = args.batch / statistics.median(vectorised)
            loop_ids_per_s = args.loop_batch / statistics.median(loop)
            rows.append(
                {
                    "graph": name,
                    "num_nodes": n,
                    "num_edges": graph.num_edges,
                    "average_degree": 2 * graph.num_edges / n,
                    "sampler": sampler,
                    "backend": backend,
                    "p": p,
                    "rho": args.rho,
                    "batch": args.batch,
                    "seconds": vectorised,
                    "median_seconds": statistics.median(vectorised),
                    "ids_per_s": ids_per_s,
                    "best_ids_per_s": args.batch / min(vectorised),
                    "loop_batch": args.loop_batch,
                    "loop_seconds": loop,
                    "loop_ids_per_s": loop_ids_per_s,
                    "speedup_over_loop": ids_per_s / loop_ids_per_s,
                    "target_ids_per_s": target,
                    "meets_throughput_target": ids_per_s >= target,
                    "meets_speedup_target": ids_per_s / loop_ids_per_s >= TARGET_LOOP_SPEEDUP,
                }
            )
    return rows


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """One line per (graph, sampler, p); speed-up = median vectorised ids/s over median loop ids/s."""
    lines = [
        "| graph | N | avg deg | sampler | backend | p | median ids/s | best ids/s | loop ids/s | speed-up "
        "| target ids/s | meets target | >= 100x loop |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['graph']} | {row['num_nodes']} | {row['average_degree']:.1f} | {row['sampler']} "
            f"| {row['backend']} | {row['p']} "
            f"| {row['ids_per_s'] / 1e6:.1f}M | {row['best_ids_per_s'] / 1e6:.1f}M "
            f"| {row['loop_ids_per_s'] / 1e6:.2f}M | {row['speedup_over_loop']:.0f}x "
            f"| {row['target_ids_per_s'] / 1e6:.0f}M | {'yes' if row['meets_throughput_target'] else 'NO'} "
            f"| {'yes' if row['meets_speedup_target'] else 'NO'} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=1_000_000, help="ids per vectorised call")
    parser.add_argument("--loop-batch", type=int, default=20_000, help="ids per call of the Python loop reference")
    parser.add_argument("--p", type=float, nargs="+", default=[0.01, 0.1], help="swap probabilities to time")
    parser.add_argument("--rho", type=float, default=10.0, help="SSE-Graph neighbour preference")
    parser.add_argument("--nodes", type=int, default=1682, help="synthetic graph size (ML-100k items)")
    parser.add_argument("--average-degree", type=float, default=120.0, help="synthetic graph average degree")
    parser.add_argument("--edges", type=str, default=None, help="optional (E, 2) int .npy edge array of a real graph")
    parser.add_argument(
        "--ml100k-kg",
        action="store_true",
        help="also time the real ML-100k item graph (items sharing actor/director/writer/producer)",
    )
    parser.add_argument("--edges-num-nodes", type=int, default=None, help="node count for --edges (default max id + 1)")
    parser.add_argument("--reps", type=int, default=21, help="timed repetitions (median reported)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed warm-up calls")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument(
        "--backends",
        nargs="+",
        choices=["cpp", "torch"],
        default=["cpp", "torch"],
        help="CPU backends to time (cpp: the fused kernel; torch: the tensor-op samplers)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out-json",
        type=str,
        default=str(RESULTS / "sse-speed.json"),
        help="where to write the JSON results (default: %(default)s; '' for none)",
    )
    parser.add_argument(
        "--out-md",
        type=str,
        default=str(RESULTS / "sse-speed-table.md"),
        help="where to write the markdown table (default: %(default)s; '' for none)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(args.seed)
    rows = bench_graph("synthetic", synthetic_graph(args.nodes, args.average_degree, args.seed), args, generator)
    if args.edges:
        edges = np.load(args.edges)
        num_nodes = args.edges_num_nodes or int(edges.max()) + 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # real edge lists often list both directions or repeat pairs
            real = NeighbourGraph.from_edges(edges, num_nodes)
        rows += bench_graph(os.path.basename(args.edges), real, args, generator)
    if args.ml100k_kg:
        from embreg.data import item_graph_from_kg, load_ml100k

        ml = load_ml100k()
        kg = NeighbourGraph.from_edges(item_graph_from_kg(ml), ml.num_items)
        rows += bench_graph("ml-100k-kg", kg, args, generator)
    table = markdown_table(rows)
    print(table)
    result = {
        "benchmark": "sse_speed",
        "command": " ".join([sys.executable.split("/")[-1], *sys.argv]),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        },
        "targets": {
            "sse_se_ids_per_s": TARGET_SE_IDS_PER_S,
            "sse_graph_ids_per_s": TARGET_GRAPH_IDS_PER_S,
            "speedup_over_loop": TARGET_LOOP_SPEEDUP,
        },
        "results": rows,
    }
    for out in (args.out_json, args.out_md):
        if out:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
    if args.out_json:
        with open(args.out_json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
    if args.out_md:
        with open(args.out_md, "w", encoding="utf-8") as handle:
            handle.write(f"Command: `{result['command']}`; machine: {result['machine']}\n\n{table}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

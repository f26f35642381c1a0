"""Speed and memory of MixedDimensionEmbedding against nn.Embedding on CPU (mixed-dimension-embeddings.txt, Sec. V).

Speed: forward + backward time of one batch of ids drawn from a Zipf-like popularity over the rows, for

* ``uniform@D``   nn.Embedding(N, D), the same base dimension as the MD layer,
* ``md``          MixedDimensionEmbedding sized by Alg. 1 from base dimension D (k equal-mass blocks, Alg. 3),
  as a user gets it (two flat parameters; the fused C++ kernel when it builds, see ``--kernel``),
* ``uniform@eq``  nn.Embedding(N, d_eq) with d_eq = round(MD parameters / N): the same parameter budget,
* ``projected@p`` (with ``--projected``) one N x p table projected to D, p = round(MD parameters / (N + D)): the
  same parameter budget *and* the same output as MD, i.e. the drop-in alternative a user with that budget has
  (a one-block ``MixedDimensionEmbedding``, on the same kernel); MD's paired ratio against it is reported with
  the verdict against 1.0x ("at least as fast"),
* ``md-torch``    the same MD values as k tables and k projections, one parameter each (the layer's storage
  before the flat parameters), looked up with the tensor-op node (``functional._MixedDimensionLookup``:
  distinct rows once, hand-written backward; the layer's path before the kernel),
* ``md-reference`` the same per-block parameters looked up with
  :func:`embreg.embeddings.functional.mixed_dimension_lookup_reference` (one gather, one matmul and their
  autograd nodes per block, as the layer did before either),

with dense gradients and with sparse gradients. A step backpropagates ``out.sum()`` (``--loss sum``) or
``(out * W).sum()`` with a fixed random ``W`` (``--loss random``: a dense upstream gradient, as under a real
loss). With ``--optimizer adam`` a step also takes an optimizer step (``SparseAdam`` for sparse tables,
``Adam`` for the rest): a user's whole training step. Each step ends with the gradients released
(``grad = None``), as an optimizer loop with ``zero_grad(set_to_none=True)`` does.

Timings are the median over ``--reps`` rounds after ``--warmup`` untimed ones. A round times every
configuration once, in an order shuffled each round (seeded): each step starts with the caches and C
allocator state that other configurations have just left, and no configuration always follows the same one.
Python's garbage collector is paused, as ``timeit`` does. Two clocks: wall time and the CPU time of the thread
(``time.thread_time``; on a shared machine it leaves out the time the process waits for a core, so its ratios
are the steadier ones). Memory: bytes of parameters, buffers (the MD index map) and Adam state after one real
Adam step, measured on a table of ``--memory-rows`` rows (SYNTHETIC Zipf counts).

Example:
    python benchmarks/md_speed.py --rows 100000 1000000 --memory-rows 10000000 --out docs/results/md-speed/sum-run1-memory

The page docs/results/md-speed/README.md (with summary.json, kind "benchmark") reads the files there.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import random
import shlex
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

try:
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None

from embreg.analysis.stats import median_interval, target_verdict
from embreg.embeddings import MixedDimensionEmbedding, md_embedding, memory_report
from embreg.embeddings._kernel import fused_kernel
from embreg.embeddings.functional import _MixedDimensionLookup, mixed_dimension_lookup_reference

# environment variables that change the C allocator's behaviour (and so the page faults per step), kept with the
# results and written into the command: e.g. GLIBC_TUNABLES=glibc.malloc.trim_threshold=N:glibc.malloc.mmap_threshold=N
ALLOCATOR_VARIABLES = ("GLIBC_TUNABLES", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "LD_PRELOAD")
SPEED_TARGET = 0.7  # the target: MD throughput >= 0.7x nn.Embedding at the same base dimension


class PerBlockTables(nn.Module):
    """An MD layer's values as k separate tables and projections, one parameter each (the layer's storage before
    its two flat parameters), looked up with ``lookup(self, ids)``."""

    def __init__(self, md: MixedDimensionEmbedding, lookup) -> None:
        super().__init__()
        blocks = md.blocks
        self.weights = nn.ParameterList(nn.Parameter(b.weight.detach().clone()) for b in blocks)
        self.block_projections = [
            None if b.projection is None else nn.Parameter(b.projection.detach().clone()) for b in blocks
        ]
        self.projections = nn.ParameterList(p for p in self.block_projections if p is not None)
        self.positions, self.offsets, self.sparse, self.lookup = md.positions, md.offsets, md.sparse, lookup

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lookup(self, ids)


def _reference_lookup(tables: PerBlockTables, ids: torch.Tensor) -> torch.Tensor:
    """The per-block reference lookup (one gather and matmul and their autograd nodes per block)."""
    return mixed_dimension_lookup_reference(
        tables.positions(ids), list(tables.weights), tables.block_projections, tables.offsets, sparse=tables.sparse
    )


def _tensor_op_lookup(tables: PerBlockTables, ids: torch.Tensor) -> torch.Tensor:
    """The one-node tensor-op lookup over per-block parameters (the layer's path before the kernel)."""
    out = _MixedDimensionLookup.apply(
        tables.positions(ids).reshape(-1),
        tables.offsets,
        tables.sparse,
        len(tables.weights),
        *tables.weights,
        *tables.block_projections,
    )
    return out.reshape(*ids.shape, -1)


def zipf_counts(rows: int, exponent: float) -> torch.Tensor:
    """SYNTHETIC query counts: row r (1-based rank, shuffled ids) gets 1e9 * r^-exponent."""
    counts = 1e9 * torch.arange(1, rows + 1, dtype=torch.float64) ** -exponent
    return counts[torch.randperm(rows, generator=torch.Generator().manual_seed(0))]


def sample_ids(counts: torch.Tensor, size: int, seed: int) -> torch.Tensor:
    cdf = torch.cumsum(counts / counts.sum(), 0)
    u = torch.rand(size, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return torch.searchsorted(cdf, u).clamp_max(counts.numel() - 1)


class Loss:
    """The scalar a step backpropagates from the looked-up vectors ``out`` (B, width).

    ``sum``: ``out.sum()``, whose upstream gradient is one value broadcast over every entry (never
    materialised). ``random``: ``(out * W).sum()`` with a fixed random ``W`` (B, width) (seed 0), so the lookup
    receives a dense, contiguous upstream gradient, as it does under a real model's loss.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.weights: dict[tuple[int, ...], torch.Tensor] = {}

    def __call__(self, out: torch.Tensor) -> torch.Tensor:
        if self.kind == "sum":
            return out.sum()
        if out.shape not in self.weights:
            self.weights[out.shape] = torch.randn(out.shape, generator=torch.Generator().manual_seed(0))
        return (out * self.weights[out.shape]).sum()


def optimizers(module: nn.Module, kind: str) -> list[torch.optim.Optimizer]:
    """``none``: no optimizer (the step is forward + backward). ``adam``: ``SparseAdam`` for the parameters with
    sparse gradients (the tables of a ``sparse=True`` layer), ``Adam`` for the others, as a user of sparse
    tables trains them (lr 1e-3)."""
    if kind == "none":
        return []
    if isinstance(module, nn.Embedding):
        tables = [module.weight]
    elif isinstance(module, MixedDimensionEmbedding):
        tables = [module.flat_rows]
    else:
        tables = list(module.weights)
    tables = tables if module.sparse else []
    table_ids = {id(p) for p in tables}
    others = [p for p in module.parameters() if id(p) not in table_ids]
    return ([torch.optim.SparseAdam(tables, lr=1e-3)] if tables else []) + (
        [torch.optim.Adam(others, lr=1e-3)] if others else []
    )


def step(
    module: nn.Module,
    params: list[nn.Parameter],
    ids: torch.Tensor,
    loss: Loss,
    optimizers_: list[torch.optim.Optimizer],
) -> None:
    loss(module(ids)).backward()
    for optimizer in optimizers_:
        optimizer.step()
    for p in params:
        p.grad = None


def time_configs(
    modules: dict[str, nn.Module],
    batches: list[torch.Tensor],
    reps: int,
    warmup: int,
    loss: Loss,
    optimizer: str = "none",
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[int]]]:
    """Wall and thread-CPU seconds and minor page faults per step, per configuration."""
    wall = {name: [] for name in modules}
    cpu = {name: [] for name in modules}
    faults = {name: [] for name in modules}
    params = {name: list(module.parameters()) for name, module in modules.items()}
    optimizers_ = {name: optimizers(module, optimizer) for name, module in modules.items()}
    order, shuffler = list(modules), random.Random(0)
    with gc_paused():
        for r in range(warmup + reps):
            ids = batches[r % len(batches)]
            shuffler.shuffle(order)  # no configuration always follows the same one (and inherits its cache state)
            for name in order:
                module = modules[name]
                started_faults = minor_page_faults()
                started, started_cpu = time.perf_counter(), time.thread_time()
                step(module, params[name], ids, loss, optimizers_[name])
                if r >= warmup:
                    wall[name].append(time.perf_counter() - started)
                    cpu[name].append(time.thread_time() - started_cpu)
                    faults[name].append(minor_page_faults() - started_faults)
    return wall, cpu, faults


def minor_page_faults() -> int:
    """The process's minor page faults so far (first touches of fresh memory: on a machine where the C allocator
    hands freed memory back to the system, each step's fresh output buffers fault again; a step's count says
    how much of its time went there). -1 where ``resource`` is unavailable (Windows)."""
    return -1 if resource is None else resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's garbage collector off (as ``timeit`` does): a collection pass over every object the process holds
    would land on whichever step triggers it, and it is not the layer's cost."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def speed(
    rows: int,
    dim: int,
    batch: int,
    alpha: float,
    blocks: int,
    exponent: float,
    reps: int,
    warmup: int,
    loss: Loss,
    optimizer: str = "none",
    projected: bool = False,
) -> list[dict]:
    counts = zipf_counts(rows, exponent)
    batches = [sample_ids(counts, batch, seed) for seed in range(8)]
    out = []
    for sparse in (False, True):
        torch.manual_seed(0)
        md = md_embedding(counts, num_blocks=blocks, alpha=alpha, base_dim=dim, sparse=sparse)
        eq_dim = max(1, round(md.num_parameters / rows))
        modules = {
            f"uniform@{dim}": nn.Embedding(rows, dim, sparse=sparse),
            "md": md,
            f"uniform@{eq_dim}": nn.Embedding(rows, eq_dim, sparse=sparse),
            "md-torch": PerBlockTables(md, _tensor_op_lookup),
            "md-reference": PerBlockTables(md, _reference_lookup),
        }
        projected_name = None
        if projected:
            p_dim = max(1, round(md.num_parameters / (rows + dim)))
            projected_name = f"projected@{p_dim}"
            modules[projected_name] = MixedDimensionEmbedding([rows], [p_dim], dim, sparse=sparse)
        wall, cpu, faults = time_configs(modules, batches, reps, warmup, loss, optimizer)
        medians = {name: statistics.median(t) for name, t in wall.items()}
        cpu_medians = {name: statistics.median(t) for name, t in cpu.items()}
        rows_out = {}
        for name, module in modules.items():
            inner = md if name.startswith("md") else module
            rows_out[name] = {
                "rows": rows,
                "base_dim": dim,
                "batch": batch,
                "sparse": sparse,
                "layer": name,
                "parameters": sum(p.numel() for p in module.parameters()),
                "dims": list(getattr(inner, "block_dims", [inner.embedding_dim])),
                "median_s": medians[name],
                "ids_per_s": batch / medians[name],
                "cpu_median_s": cpu_medians[name],
                "cpu_ids_per_s": batch / cpu_medians[name],
                "times_s": wall[name],
                "cpu_times_s": cpu[name],
                "page_faults_per_step": statistics.mean(faults[name]),
            }
        for name in ("md", "md-torch", "md-reference"):
            for clock, key in (("", "median_s"), ("cpu_", "cpu_median_s")):
                rows_out[name][clock + "vs_same_base_dim"] = rows_out[f"uniform@{dim}"][key] / rows_out[name][key]
                rows_out[name][clock + "vs_same_budget"] = rows_out[f"uniform@{eq_dim}"][key] / rows_out[name][key]
        for name in ("md", "md-torch"):
            for clock, key in (("", "median_s"), ("cpu_", "cpu_median_s")):
                rows_out[name][clock + "speedup_vs_reference"] = rows_out["md-reference"][key] / rows_out[name][key]
            rows_out[name]["paired_vs_same_base_dim"] = paired_throughput_ratio(cpu[f"uniform@{dim}"], cpu[name])
        if projected_name is not None:
            rows_out["md"]["paired_vs_projected_same_budget"] = paired_throughput_ratio(
                cpu[projected_name], cpu["md"], target=1.0
            )
        out.extend(rows_out.values())
    return out


def paired_throughput_ratio(baseline_s: list[float], layer_s: list[float], target: float = SPEED_TARGET) -> dict:
    """The layer's throughput over the baseline's from the steps of the same rounds (close in time): the
    median of the per-round ratios, its 95 % bootstrap interval, and the verdict against the >= ``target``
    (default 0.7x; met: the whole interval at or above it; at limit: the interval contains it; missed: all
    below)."""
    ratios = [b / t for b, t in zip(baseline_s, layer_s)]
    # target_verdict checks a cost ratio against an upper bound: time ratio <= 1 / target
    low, high = median_interval([1 / r for r in ratios])
    return {
        "median": statistics.median(ratios),
        "low": 1 / high,
        "high": 1 / low,
        "verdict": target_verdict(low, high, 1 / target),
        "rounds": len(ratios),
        "target": target,
    }


def paired_rows(results: list[dict], key: str) -> list[str]:
    """Markdown table rows (rows, grad, layer, median, interval, verdict) of the results that carry the paired
    ratio ``key``."""
    return [
        f"| {r['rows']:,} | {'sparse' if r['sparse'] else 'dense'} | {r['layer']} | {r[key]['median']:.2f}x | "
        f"[{r[key]['low']:.2f}x, {r[key]['high']:.2f}x] | {r[key]['verdict']} |"
        for r in results
        if key in r
    ]


def memory(rows: int, dim: int, alpha: float, blocks: int, exponent: float) -> list[dict]:
    counts = zipf_counts(rows, exponent)
    ids = sample_ids(counts, 4096, 0)
    out = []
    for name in ("md", f"uniform@{dim}"):
        torch.manual_seed(0)
        if name == "md":
            module = md_embedding(counts, num_blocks=blocks, alpha=alpha, base_dim=dim)
        else:
            module = nn.Embedding(rows, dim)
        optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
        module(ids).sum().backward()
        optimizer.step()
        report = memory_report(module, optimizer)
        report.update(
            {"layer": name, "rows": rows, "base_dim": dim, "dims": list(getattr(module, "block_dims", [dim]))}
        )
        out.append(report)
        del module, optimizer
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--alpha", type=float, default=0.3)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--exponent", type=float, default=1.05)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--loss",
        choices=("sum", "random"),
        default="sum",
        help="what each step backpropagates (see Loss): out.sum() or (out * W).sum()",
    )
    parser.add_argument(
        "--optimizer",
        choices=("none", "adam"),
        default="none",
        help="none: a step is forward + backward; adam: plus an optimizer step (SparseAdam for "
        "sparse tables, Adam for the rest; see optimizers())",
    )
    parser.add_argument(
        "--kernel",
        choices=("auto", "off", "on"),
        default="on",
        help="EMBREG_MD_KERNEL for the md row (default on: fail rather than time the fallback)",
    )
    parser.add_argument(
        "--projected",
        action="store_true",
        help="also time projected@p: one table at MD's parameter budget projected to the base "
        "dimension (same budget, same output), with MD's paired ratio against it",
    )
    parser.add_argument("--memory-rows", type=int, default=10_000_000)
    parser.add_argument("--memory-dim", type=int, default=32)
    parser.add_argument("--note", default="", help="free text about the machine's state, kept in the JSON")
    parser.add_argument("--out", required=True, help="output prefix (.json, .md)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    os.environ["EMBREG_MD_KERNEL"] = args.kernel
    backend = "cpp kernel" if fused_kernel() is not None else "tensor ops"
    results = {"speed": [], "memory": []}
    for rows in args.rows:
        results["speed"].extend(
            speed(
                rows,
                args.dim,
                args.batch,
                args.alpha,
                args.blocks,
                args.exponent,
                args.reps,
                args.warmup,
                Loss(args.loss),
                args.optimizer,
                args.projected,
            )
        )
    if args.memory_rows:
        results["memory"] = memory(args.memory_rows, args.memory_dim, args.alpha, args.blocks, args.exponent)
    allocator = {name: os.environ[name] for name in ALLOCATOR_VARIABLES if name in os.environ}
    command = " ".join(
        [
            *(f"{name}={value}" for name, value in allocator.items()),
            "python",
            shlex.join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
        ]
    )
    results["command"] = command
    results["machine"] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "threads": args.threads,
        "torch": torch.__version__,
        "gpu": None,
        "md_backend": backend,
        "loss": args.loss,
        "optimizer": args.optimizer,
        "note": args.note,
        "allocator_environment": allocator,
    }
    lines = [
        f"<!-- generated by: {command} -->",
        "",
        "Throughput: ids per second of forward + backward"
        + (" + optimizer step (SparseAdam for sparse tables, Adam for the rest)" if args.optimizer == "adam" else "")
        + ", median over steps; wall clock / thread CPU time. "
        "Ratios: the layer's throughput over the uniform layer's (> 1: faster). "
        f"`md` runs the {backend}; `md-torch` the tensor-op node, `md-reference` the per-block lookup. "
        f"Each step backpropagates `{'out.sum()' if args.loss == 'sum' else '(out * W).sum()'}`.",
        "",
        "Page faults: minor page faults per step, mean (fresh memory touched; see `minor_page_faults`).",
        "",
        "| rows | grad | layer | params | dims | ids/s wall | ids/s CPU | page faults | "
        "vs same base dim (wall / CPU) | vs same budget (wall / CPU) | vs md-reference (wall / CPU) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["speed"]:
        dims = r["dims"] if len(r["dims"]) <= 8 else r["dims"][:8] + ["..."]
        ratio1 = f"{r['vs_same_base_dim']:.2f}x / {r['cpu_vs_same_base_dim']:.2f}x" if "vs_same_base_dim" in r else ""
        ratio2 = f"{r['vs_same_budget']:.2f}x / {r['cpu_vs_same_budget']:.2f}x" if "vs_same_budget" in r else ""
        ratio3 = (
            f"{r['speedup_vs_reference']:.2f}x / {r['cpu_speedup_vs_reference']:.2f}x"
            if "speedup_vs_reference" in r
            else ""
        )
        grad = "sparse" if r["sparse"] else "dense"
        lines.append(
            f"| {r['rows']:,} | {grad} | {r['layer']} | {r['parameters']:,} | {dims} | "
            f"{r['ids_per_s'] / 1e6:.2f} M | {r['cpu_ids_per_s'] / 1e6:.2f} M | "
            f"{r['page_faults_per_step']:.0f} | {ratio1} | {ratio2} | {ratio3} |"
        )
    lines += [
        "",
        "Target check (MD throughput >= 0.7x `nn.Embedding` at the same base dimension): per-round ratio of "
        "thread-CPU step times (each round times every configuration once, in a shuffled order, so a "
        "round's two steps are close in time), median and 95 % bootstrap interval over the rounds.",
        "",
        "| rows | grad | layer | median | 95 % interval | verdict |",
        "|---|---|---|---|---|---|",
    ]
    lines += paired_rows(results["speed"], "paired_vs_same_base_dim")
    if any("paired_vs_projected_same_budget" in r for r in results["speed"]):
        lines += [
            "",
            "Same budget, same output (MD throughput >= 1.0x a single table at MD's parameter budget "
            "projected to the base dimension, `projected@p`): per-round paired ratio as above.",
            "",
            "| rows | grad | layer | median | 95 % interval | verdict |",
            "|---|---|---|---|---|---|",
        ]
        lines += paired_rows(results["speed"], "paired_vs_projected_same_budget")
    if results["memory"]:
        lines += [
            "",
            "| layer | rows | dims | parameters | parameter bytes | buffer bytes | Adam state bytes | total |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for m in results["memory"]:
            lines.append(
                f"| {m['layer']} | {m['rows']:,} | {m['dims']} | {m['parameters']:,} | "
                f"{m['parameter_bytes']:,} | {m['buffer_bytes']:,} | {m['optimizer_bytes']:,} | "
                f"{m['total_bytes']:,} |"
            )
    table = "\n".join(lines) + "\n"
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    out.with_suffix(".md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

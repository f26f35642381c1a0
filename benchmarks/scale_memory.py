"""Memory of an embedding table at scale: one uniform table against a mixed-dimension table.

For ``N`` rows (default 10^6, 10^7, 10^8) and base dimensions ``D`` (16, 64), this counts the bytes a table and its
optimizer state hold for

* ``uniform``   ``nn.Embedding(N, D)``,
* ``md@alpha``  ``MixedDimensionEmbedding`` sized by the library's popularity rule (equal-mass blocking, Alg. 3,
  ``--blocks`` blocks; power-law dimensions, Alg. 1, temperature alpha, the most popular block at ``D``),

under plain SGD (no state), SGD with momentum (one buffer per parameter), Adagrad (one) and Adam (two moments).
The popularity is SYNTHETIC: row of rank r is queried ``1e9 * r^-exponent`` times (Zipf, ``--exponent``; the
counts are shuffled over the ids for the real builds, so the MD layer needs its index map: a buffer of N int32,
counted in its total).

Counting: every layer is built on torch's ``meta`` device (shapes and dtypes, no storage), its gradients are
``empty_like`` meta tensors, and the real ``torch.optim`` class takes one step there, so the optimizer creates its
state tensors exactly as it would on the CPU; bytes are ``numel * element_size`` of every parameter, buffer and
state tensor (``embreg.embeddings.memory_report``). 10^8 rows thus need no memory. The MD sizing of 10^8 rows runs
on the rank-ordered counts in chunks (:func:`zipf_equipartition`, the same rule as
``embreg.embeddings.equipartition_blocks`` without an N-sized sort).

Validation (``--validate-rows``, default 10^6 and 10^7): the same layers are built for real on the CPU through the
library's own path (``md_embedding`` on the shuffled counts), one forward/backward of 4,096 Zipf-drawn ids and
one optimizer step create the state, the gradients are dropped, and the bytes of the distinct storages behind
every parameter, buffer and state tensor are summed; they must equal the count (and the MD layer's block
dimensions must equal those of the chunked sizing). The growth of the process's resident memory over the build
and step is reported beside it (informative: the C allocator keeps or returns freed memory as it likes).
Builds whose peak (parameters + dense gradient + state) would pass ``--validate-max-gib`` are skipped and listed.

    python benchmarks/scale_memory.py --rows 1000000 10000000 100000000 --base-dims 16 64 --alphas 0.2 0.3 0.4

writes ``scale-memory.json``, ``scale-memory.png`` (GiB against rows), ``README.md`` (the page) and
``summary.json`` (for the results hub) into ``--out-dir`` (default ``docs/results/scale-memory``).
``--quick``: tiny sizes for a smoke run (into a folder you name).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from embreg.embeddings import (
    Blocking,
    MixedDimensionEmbedding,
    equipartition_blocks,
    md_embedding,
    memory_report,
    plan_mixed_dimensions,
)
from embreg.studies.hub import write_benchmark_summary

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "scale-memory"
OPTIMIZERS = ("sgd", "sgd-momentum", "adagrad", "adam")
GIB = 2**30
RSS_READABLE_BYTES = 256 * 2**20  # below this, RSS growth is mostly the allocator's slack
COUNT_SCALE = 1e9  # count of the most popular row


def make_optimizer(name: str, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """``torch.optim`` optimizer ``name`` (one of :data:`OPTIMIZERS`) over ``params``."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=1e-3)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")


# ------------------------------------------------------------------------------------------------ SYNTHETIC counts
def zipf_rank_counts(start: int, stop: int, exponent: float) -> torch.Tensor:
    """SYNTHETIC counts of the rows of ranks ``start + 1 .. stop`` (0-based positions start..stop-1), float64."""
    return COUNT_SCALE * torch.arange(start + 1, stop + 1, dtype=torch.float64) ** -exponent


def zipf_counts(rows: int, exponent: float, seed: int = 0) -> torch.Tensor:
    """SYNTHETIC (rows,) counts: Zipf by rank, shuffled over the ids (ids are not sorted by popularity)."""
    counts = zipf_rank_counts(0, rows, exponent)
    return counts[torch.randperm(rows, generator=torch.Generator().manual_seed(seed))]


def zipf_equipartition(rows: int, exponent: float, num_blocks: int, chunk: int = 1 << 22) -> Blocking:
    """The equal-mass blocking of ``rows`` Zipf-counted rows, in rank order, computed in chunks of ``chunk`` rows.

    The rule of :func:`embreg.embeddings.equipartition_blocks` (cut ``j`` at the prefix whose cumulative count is
    closest to ``j / k`` of the total, at least one row per block) on counts that are already sorted, so no
    (N,) sort, prefix or permutation is held: memory is one chunk. Positions are ranks (``permutation=None``).
    """
    chunks = [(a, min(a + chunk, rows)) for a in range(0, rows, chunk)]
    total = sum(float(zipf_rank_counts(a, b, exponent).sum()) for a, b in chunks)
    targets = [total * j / num_blocks for j in range(1, num_blocks)]
    cuts: list[int] = []
    running, j = 0.0, 0
    for a, b in chunks:
        prefix = running + zipf_rank_counts(a, b, exponent).cumsum(0)  # prefix[t] = counts of positions a..a+t
        end = float(prefix[-1])
        while j < len(targets) and end >= targets[j]:
            target = targets[j]
            t = int(torch.searchsorted(prefix, torch.tensor([target], dtype=torch.float64)).item())
            after, after_value = a + t + 1, float(prefix[t])  # first prefix index whose value >= target
            before_value = float(prefix[t - 1]) if t > 0 else running
            cuts.append(after - 1 if abs(before_value - target) <= abs(after_value - target) else after)
            j += 1
        running = end
    while len(cuts) < len(targets):  # rounding left a target past the total: cut at the end
        cuts.append(rows)
    offsets = [0]
    for j, cut in enumerate(cuts, start=1):
        offsets.append(min(max(cut, offsets[-1] + 1), rows - (num_blocks - j)))
    offsets.append(rows)
    sums = [0.0] * num_blocks
    for a, b in chunks:
        counts = zipf_rank_counts(a, b, exponent)
        for i, (lo, hi) in enumerate(zip(offsets, offsets[1:])):
            if lo < b and hi > a:
                sums[i] += float(counts[max(lo, a) - a : min(hi, b) - a].sum())
    mass = tuple(s / total for s in sums)
    popularity = tuple(m / (hi - lo) for m, lo, hi in zip(mass, offsets, offsets[1:]))
    return Blocking(tuple(offsets), popularity, mass, permutation=None)


# ------------------------------------------------------------------------------------------------------ counting
def meta_layer(kind: str, rows: int, base_dim: int, blocking: Blocking | None, alpha: float) -> nn.Module:
    """The layer ``kind`` (``uniform`` or ``md``) on the meta device; the MD layer gets an (N,) index map buffer
    of the dtype the layer stores for N rows (int32 below 2^31 rows), as a real build from shuffled ids has."""
    if kind == "uniform":
        return nn.Embedding(rows, base_dim, device="meta")
    assert blocking is not None
    plan = plan_mixed_dimensions([blocking], alpha, base_dim=base_dim)
    layer = MixedDimensionEmbedding(blocking.rows, plan.dims[0], base_dim, device="meta")
    layer.index_map = torch.empty(rows, dtype=torch.int32 if rows < 2**31 else torch.int64, device="meta")
    return layer


def count_bytes(layer: nn.Module) -> dict[str, Any]:
    """Parameter and buffer bytes of ``layer`` and, per optimizer, the bytes of its state after one step (meta)."""
    report = memory_report(layer)
    state = {}
    for name in OPTIMIZERS:
        params = list(layer.parameters())
        for p in params:
            p.grad = torch.empty_like(p)
        optimizer = make_optimizer(name, params)
        optimizer.step()
        state[name] = memory_report(layer, optimizer)["optimizer_bytes"]
        for p in params:
            p.grad = None
        del optimizer
    return {
        "parameters": report["parameters"],
        "parameter_bytes": report["parameter_bytes"],
        "buffer_bytes": report["buffer_bytes"],
        "optimizer_bytes": state,
        "total_bytes": {name: report["parameter_bytes"] + report["buffer_bytes"] + s for name, s in state.items()},
    }


def layer_shape(layer: nn.Module) -> dict[str, Any]:
    if isinstance(layer, MixedDimensionEmbedding):
        return {"block_dims": list(layer.block_dims), "block_rows": list(layer.block_rows)}
    return {"block_dims": [layer.embedding_dim], "block_rows": [layer.num_embeddings]}


# ---------------------------------------------------------------------------------------------------- validation
def resident_bytes() -> int | None:
    """The process's resident memory now (Linux ``/proc/self/statm``), else None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def storage_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (what was allocated, views counted once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def allocated_bytes(
    kind: str, rows: int, base_dim: int, blocks: int, alpha: float, counts: torch.Tensor
) -> dict[str, Any]:
    """Builds the layer for real (library path), steps every optimizer once, measures what was allocated."""
    out: dict[str, Any] = {"optimizer_bytes": {}, "rss_growth_bytes": {}}
    gc.collect()
    rss_before = resident_bytes()
    torch.manual_seed(0)
    if kind == "uniform":
        layer: nn.Module = nn.Embedding(rows, base_dim)
    else:
        layer = md_embedding(counts, num_blocks=blocks, alpha=alpha, base_dim=base_dim)
    rss_layer = resident_bytes()
    out["parameter_bytes"] = storage_bytes(list(layer.parameters()))
    out["buffer_bytes"] = storage_bytes(list(layer.buffers()))
    out.update(layer_shape(layer))
    probabilities = counts / counts.sum()
    ids = torch.multinomial(probabilities, 4096, replacement=True, generator=torch.Generator().manual_seed(0))
    del probabilities
    for name in OPTIMIZERS:
        params = list(layer.parameters())
        optimizer = make_optimizer(name, params)
        layer(ids).sum().backward()
        optimizer.step()
        for p in params:
            p.grad = None  # freed here by reference counting (no collection pass needed)
        rss_after = resident_bytes()
        state = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
        out["optimizer_bytes"][name] = storage_bytes(state)
        if rss_before is not None and rss_after is not None and rss_layer is not None:
            out["rss_growth_bytes"][name] = rss_after - rss_before
        del optimizer, state
    out["rss_layer_growth_bytes"] = None if rss_before is None or rss_layer is None else rss_layer - rss_before
    del layer
    return out


# ----------------------------------------------------------------------------------------------------- the study
def run(args: argparse.Namespace) -> dict[str, Any]:
    records: list[dict[str, Any]] = []
    validation: list[dict[str, Any]] = []
    for rows in args.rows:
        started = time.perf_counter()
        blocking = zipf_equipartition(rows, args.exponent, args.blocks)
        sizing_seconds = time.perf_counter() - started
        counts = zipf_counts(rows, args.exponent) if rows in args.validate_rows else None
        library_blocking = equipartition_blocks(counts, args.blocks) if counts is not None else None
        for base_dim in args.base_dims:
            configs = [("uniform", 0.0)] + [("md", alpha) for alpha in args.alphas]
            for kind, alpha in configs:
                layer = meta_layer(kind, rows, base_dim, blocking, alpha)
                record = {
                    "rows": rows,
                    "base_dim": base_dim,
                    "layer": "uniform" if kind == "uniform" else f"md@{alpha:g}",
                    "alpha": alpha if kind == "md" else None,
                    **layer_shape(layer),
                    **count_bytes(layer),
                }
                if kind == "md":
                    record["blocking_offsets"] = list(blocking.offsets)
                    record["sizing_seconds"] = sizing_seconds
                records.append(record)
                print(
                    f"rows {rows:>11,} D {base_dim:>3} {record['layer']:>8}: "
                    f"Adam total {record['total_bytes']['adam'] / GIB:8.3f} GiB, dims {record['block_dims']}",
                    flush=True,
                )
                if counts is None:
                    continue
                counted = record["total_bytes"]
                peak = counted["adam"] + record["parameter_bytes"]  # + dense gradient during the step
                if peak > args.validate_max_gib * GIB:
                    validation.append(
                        {
                            "rows": rows,
                            "base_dim": base_dim,
                            "layer": record["layer"],
                            "skipped": f"peak {peak / GIB:.1f} GiB > --validate-max-gib {args.validate_max_gib}",
                        }
                    )
                    continue
                real = allocated_bytes(kind, rows, base_dim, args.blocks, alpha, counts)
                real_total = {
                    name: real["parameter_bytes"] + real["buffer_bytes"] + real["optimizer_bytes"][name]
                    for name in OPTIMIZERS
                }
                check = {
                    "rows": rows,
                    "base_dim": base_dim,
                    "layer": record["layer"],
                    "counted_total_bytes": counted,
                    "allocated_total_bytes": real_total,
                    "counted_equals_allocated": all(counted[n] == real_total[n] for n in OPTIMIZERS),
                    "dims_equal": real["block_dims"] == record["block_dims"]
                    and real["block_rows"] == record["block_rows"],
                    "rss_growth_bytes": real["rss_growth_bytes"],
                    "rss_growth_over_counted": {
                        n: real["rss_growth_bytes"][n] / counted[n] for n in real["rss_growth_bytes"]
                    },
                }
                if kind == "md" and library_blocking is not None:
                    check["chunked_blocking_equals_library"] = list(library_blocking.offsets) == list(blocking.offsets)
                validation.append(check)
                print(
                    f"    validated: counted == allocated {check['counted_equals_allocated']}, "
                    f"dims equal {check['dims_equal']}, RSS growth / counted (adam) "
                    f"{check['rss_growth_over_counted'].get('adam', float('nan')):.3f}",
                    flush=True,
                )
        del counts, library_blocking
    return {"records": records, "validation": validation, "ratios": ratios(records)}


def ratios(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MD total / uniform total per rows, base dim, alpha and optimizer (and for parameters alone)."""
    uniform = {(r["rows"], r["base_dim"]): r for r in records if r["layer"] == "uniform"}
    out = []
    for r in records:
        if r["layer"] == "uniform":
            continue
        u = uniform[(r["rows"], r["base_dim"])]
        out.append(
            {
                "rows": r["rows"],
                "base_dim": r["base_dim"],
                "layer": r["layer"],
                "parameters": r["parameter_bytes"] / u["parameter_bytes"],
                **{name: r["total_bytes"][name] / u["total_bytes"][name] for name in OPTIMIZERS},
            }
        )
    return out


# ---------------------------------------------------------------------------------------------------- the page
def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = result["records"]
    dims = sorted({r["base_dim"] for r in records})
    fig, axes = plt.subplots(1, len(dims), figsize=(5.2 * len(dims), 4.2), squeeze=False)
    for ax, dim in zip(axes[0], dims):
        layers = sorted({r["layer"] for r in records if r["base_dim"] == dim}, key=lambda n: (n != "uniform", n))
        for name in layers:
            points = sorted((r["rows"], r) for r in records if r["base_dim"] == dim and r["layer"] == name)
            xs = [p[0] for p in points]
            style = {"color": "black", "linewidth": 2} if name == "uniform" else {}
            line = ax.plot(xs, [p[1]["total_bytes"]["adam"] / GIB for p in points], marker="o", label=name, **style)
            ax.plot(
                xs,
                [(p[1]["parameter_bytes"] + p[1]["buffer_bytes"]) / GIB for p in points],
                linestyle=":",
                color=line[0].get_color(),
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows N")
        ax.set_ylabel("GiB")
        ax.set_title(f"base dim {dim}: solid = params + Adam state, dotted = params (+ index map)", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Embedding table memory, uniform vs mixed-dimension (SYNTHETIC Zipf popularity)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def reading(result: dict[str, Any]) -> list[str]:
    """Bytes per row at the largest N, from the records: where the MD layer's memory goes."""
    records = result["records"]
    largest = max(r["rows"] for r in records)
    out = []
    for dim in sorted({r["base_dim"] for r in records}):
        u = next(r for r in records if r["rows"] == largest and r["base_dim"] == dim and r["layer"] == "uniform")
        parts = []
        for r in records:
            if r["rows"] != largest or r["base_dim"] != dim or r["layer"] == "uniform":
                continue
            low = sum(n for n, d in zip(r["block_rows"], r["block_dims"]) if d <= 2) / largest
            parts.append(
                f"{r['layer']} {r['total_bytes']['adam'] / largest:.1f} B/row ({r['buffer_bytes'] / largest:.1f} of "
                f"them the index map; {low:.1%} of rows at dimension <= 2)"
            )
        out.append(
            f"* {largest:,} rows, base dim {dim}, with Adam: uniform {u['total_bytes']['adam'] / largest:.1f} B/row "
            f"(4 B x {dim} x 3: the row and its two moments); " + "; ".join(parts) + "."
        )
    out.append(
        "* Under a Zipf popularity almost every row falls in the last, least popular blocks, which Alg. 1 gives "
        "dimension 1 or 2 at alpha >= 0.3: a row there costs 4 B x d x 3 with Adam plus 4 B of index map (the "
        "ids are shuffled, so the layer maps each id to its blocked position). The MD / uniform ratio therefore "
        "approaches (12 d_min + 4) / (12 D) as N grows, and the index map then weighs as much as the "
        "parameters themselves (4 B/row each at d = 1); it could be dropped only if the caller numbered its ids by "
        "popularity."
    )
    return out


def _validated(check: dict[str, Any]) -> bool:
    """A real build matched its count: equal bytes, equal MD block rows and dims, equal blocking offsets."""
    return bool(
        check["counted_equals_allocated"] and check["dims_equal"] and check.get("chunked_blocking_equals_library", True)
    )


def gib(n: int) -> str:
    return f"{n / GIB:.3f}" if n < 10 * GIB else f"{n / GIB:.1f}"


def page(result: dict[str, Any]) -> str:
    records, validation, meta = result["records"], result["validation"], result["meta"]
    by_key = {(r["rows"], r["base_dim"], r["layer"]): r for r in records}
    rows_list = sorted({r["rows"] for r in records})
    dims = sorted({r["base_dim"] for r in records})
    md_names = sorted({r["layer"] for r in records if r["layer"] != "uniform"})
    lines = [
        "# Embedding memory at scale: one uniform table vs a mixed-dimension table",
        "",
        "`benchmarks/scale_memory.py`. Bytes of parameters + buffers (the MD "
        "layer's index map) + optimizer state of `nn.Embedding(N, D)` against `MixedDimensionEmbedding` sized by "
        f"the library's popularity rule ({meta['blocks']} equal-mass blocks, Alg. 3; power-law dimensions, Alg. 1, "
        "most popular block at D). **The popularity is SYNTHETIC**: row of rank r is queried 1e9 r^-"
        f"{meta['exponent']} times (Zipf), so the numbers hold for that popularity, not for a particular data set.",
        "",
        "Counted on torch's `meta` device (shapes and dtypes, no storage): the real `torch.optim` class takes one "
        "step there and creates its state as it would on the CPU, so 10^8 rows need no memory. Validated at "
        f"{', '.join(f'{n:,}' for n in meta['validate_rows'])} rows by building the same layers for real through "
        "the library (`md_embedding` on the shuffled counts), one forward/backward and optimizer step, and summing "
        "the storages actually allocated (table below). Not counted: the gradient (a dense gradient of either "
        "layer adds its parameter bytes during a step; sparse gradients hold only the batch's rows) and the "
        "activations.",
        "",
        f"Command: `{meta['command']}`  ",
        f"Machine: {meta['machine_text']}; torch {meta['torch']}. The counts are exact and do not depend on the "
        "machine's load.",
        "",
        "![GiB against rows](scale-memory.png)",
        "",
        "## Parameters + Adam state (GiB) and the MD / uniform ratio",
        "",
        "| rows | base dim | uniform | " + " | ".join(md_names) + " |",
        "|---:|---:|---:|" + "---:|" * len(md_names),
    ]
    for rows in rows_list:
        for dim in dims:
            u = by_key[(rows, dim, "uniform")]["total_bytes"]["adam"]
            cells = []
            for name in md_names:
                m = by_key[(rows, dim, name)]["total_bytes"]["adam"]
                cells.append(f"{gib(m)} ({m / u:.3f}x)")
            lines.append(f"| {rows:,} | {dim} | {gib(u)} | " + " | ".join(cells) + " |")
    lines += ["", "## Reading", "", *reading(result), "", "## By optimizer (GiB; parameters + index map + state)"]
    lines += [
        "",
        "| rows | base dim | layer | parameters | params (GiB) | index map + offsets (MiB) | SGD | SGD + momentum | "
        "Adagrad | Adam | MD / uniform (Adam) |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rows in rows_list:
        for dim in dims:
            u = by_key[(rows, dim, "uniform")]
            for name in ["uniform", *md_names]:
                r = by_key[(rows, dim, name)]
                t = r["total_bytes"]
                ratio = "—" if name == "uniform" else f"{t['adam'] / u['total_bytes']['adam']:.3f}x"
                lines.append(
                    f"| {rows:,} | {dim} | {name} | {r['parameters']:,} | {gib(r['parameter_bytes'])} | "
                    f"{r['buffer_bytes'] / 2**20:.1f} | {gib(t['sgd'])} | {gib(t['sgd-momentum'])} | "
                    f"{gib(t['adagrad'])} | {gib(t['adam'])} | {ratio} |"
                )
    lines += [
        "",
        "## MD block dimensions and rows",
        "",
        "| rows | base dim | layer | block dims | block rows |",
        "|---:|---:|---|---|---|",
    ]
    for rows in rows_list:
        for dim in dims:
            for name in md_names:
                r = by_key[(rows, dim, name)]
                lines.append(f"| {rows:,} | {dim} | {name} | {r['block_dims']} | {r['block_rows']} |")
    lines += [
        "",
        "## Validation: counted (meta) against allocated (CPU)",
        "",
        "Allocated: the bytes of the distinct storages behind every parameter, buffer and optimizer-state tensor "
        "after one real step of each optimizer (the count must equal it exactly, for all four optimizers). RSS "
        "growth: the process's resident memory after the build and the Adam step minus before, over the counted "
        f"Adam total (informative only, shown from {RSS_READABLE_BYTES // 2**20} MiB: the allocator may keep or "
        "return freed blocks).",
        "",
        "| rows | base dim | layer | counted, Adam (bytes) | allocated, Adam (bytes) | equal (all optimizers) | "
        "MD blocks and dims equal the chunked sizing | RSS growth / counted |",
        "|---:|---:|---|---:|---:|---|---|---:|",
    ]
    for v in validation:
        if "skipped" in v:
            lines.append(f"| {v['rows']:,} | {v['base_dim']} | {v['layer']} | skipped: {v['skipped']} | | | | |")
            continue
        dims_ok = "—"
        if v["layer"] != "uniform":
            same = v["dims_equal"] and v.get("chunked_blocking_equals_library", True)
            dims_ok = "yes" if same else "**no**"
        rss = v["rss_growth_over_counted"].get("adam")
        if v["counted_total_bytes"]["adam"] < RSS_READABLE_BYTES:
            rss = None  # too small to tell apart from the allocator's own slack
        lines.append(
            f"| {v['rows']:,} | {v['base_dim']} | {v['layer']} | {v['counted_total_bytes']['adam']:,} | "
            f"{v['allocated_total_bytes']['adam']:,} | {'yes' if v['counted_equals_allocated'] else '**no**'} | "
            f"{dims_ok} | {'—' if rss is None else f'{rss:.3f}'} |"
        )
    checked = [v for v in validation if "skipped" not in v]
    all_equal = bool(checked) and all(_validated(v) for v in checked)
    lines += [
        "",
        "Every real build matches its count (bytes for all four optimizers; MD blocks and dims): "
        f"{'yes' if all_equal else '**no**'} ({len(checked)} builds, {len(validation) - len(checked)} skipped for "
        "memory).",
        "",
        "## Files",
        "",
        "* `scale-memory.json`: every record (per layer: block dims and rows, parameters, parameter/buffer bytes, "
        "state and total bytes per optimizer), the ratios and the validation.",
        "* `scale-memory.png`: the plot above.",
        "",
    ]
    return "\n".join(lines)


def write_summary(out_dir: Path, result: dict[str, Any]) -> None:
    meta = result["meta"]
    records = {(r["rows"], r["base_dim"], r["layer"]): r for r in result["records"]}
    largest = max(r["rows"] for r in result["records"])
    claims = []
    for dim in sorted({r["base_dim"] for r in result["records"]}):
        u = records[(largest, dim, "uniform")]["total_bytes"]["adam"]
        parts = []
        worst = 0.0
        for name in sorted({r["layer"] for r in result["records"] if r["layer"] != "uniform"}):
            m = records[(largest, dim, name)]["total_bytes"]["adam"]
            worst = max(worst, m / u)
            parts.append(f"{name} {m / GIB:.2f} GiB ({m / u:.3f}x)")
        claims.append(
            {
                "claim": f"Parameters + Adam state of a {largest:,}-row table, base dim {dim}: MD far below one "
                "uniform table (SYNTHETIC Zipf popularity)",
                "reading": f"uniform {u / GIB:.1f} GiB; " + ", ".join(parts),
                "verdict": "met" if worst < 0.5 else "not met",
                "p": None,
            }
        )
    checked = [v for v in result["validation"] if "skipped" not in v]
    ok = bool(checked) and all(_validated(v) for v in checked)
    claims.append(
        {
            "claim": "Bytes counted on the meta device equal the bytes allocated on the CPU (parameters, index map, "
            "optimizer state; SGD, momentum, Adagrad, Adam)",
            "reading": f"{len(checked)} real builds at {', '.join(f'{n:,}' for n in meta['validate_rows'])} rows: "
            + ("all equal" if ok else "MISMATCH")
            + f"; {len(result['validation']) - len(checked)} skipped for memory",
            "verdict": "met" if ok else "not met",
            "p": None,
        }
    )
    write_benchmark_summary(
        out_dir,
        "scale-memory",
        "Embedding memory at scale: uniform vs mixed-dimension tables",
        "mixed-dimension-embeddings.txt",
        claims,
        meta["machine_text"] + f", torch {meta['torch']}",
        meta["command"],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10**6, 10**7, 10**8])
    parser.add_argument("--base-dims", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.2, 0.3, 0.4])
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--exponent", type=float, default=1.05, help="Zipf exponent of the SYNTHETIC popularity")
    parser.add_argument(
        "--validate-rows", type=int, nargs="*", default=[10**6, 10**7], help="row counts built for real"
    )
    parser.add_argument(
        "--validate-max-gib", type=float, default=8.0, help="skip real builds whose peak would pass this"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--note", default="", help="free text about the machine's state, kept with the results")
    parser.add_argument("--out-dir", type=Path, default=RESULTS, help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.base_dims, args.alphas, args.validate_rows = [2000, 20000], [8], [0.3], [2000, 20000]
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    result = run(args)
    command = "python " + shlex.join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])])
    machine = f"{os.cpu_count()}-core {platform.machine()} CPU, {args.threads} torch threads, no GPU"
    if args.note:
        machine += f" ({args.note})"
    result["meta"] = {
        "command": command,
        "machine_text": machine,
        "platform": platform.platform(),
        "torch": torch.__version__,
        "rows": args.rows,
        "base_dims": args.base_dims,
        "alphas": args.alphas,
        "blocks": args.blocks,
        "exponent": args.exponent,
        "validate_rows": args.validate_rows,
        "validate_max_gib": args.validate_max_gib,
        "optimizers": list(OPTIMIZERS),
        "popularity": "SYNTHETIC Zipf",
        "seconds": time.perf_counter() - started,
    }
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale-memory.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out / "scale-memory.png")
    (out / "README.md").write_text(page(result))
    write_summary(out, result)
    print(f"wrote {out}/scale-memory.json, scale-memory.png, README.md, summary.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

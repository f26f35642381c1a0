"""How an MF epoch's time grows with the data: ML-100k and SYNTHETIC 10^6 / 10^7 ratings against a memory floor.

Each data size is trained through the library's own path: the ``mf`` recipe
(biased MF, squared loss, Adam) built by ``embreg.recipes.run.build_run`` and trained by its ``Trainer.fit`` for
``--reps`` epochs, with ``data.path=<parquet>`` for the synthetic sizes (as ``embreg run mf --set
data.path=...``), ``model.dim`` ``--dim`` and ``train.batch_size`` each of ``--batch-sizes``.

* ML-100k: the real MovieLens-100k ratings of the ``mf`` recipe (943 users x 1,682 items).
* SYNTHETIC 10^6: 6,040 users x 3,706 items (ML-1M's counts); SYNTHETIC 10^7: 69,878 x 10,677 (ML-10M's). Users
  and items are drawn from Zipf popularities (exponents ``--user-zipf``, ``--item-zipf``; popularity ranks shuffled
  over the ids), ratings are 1..5 from user and item offsets plus noise. Every (user, item) pair occurs once (the library refuses
  repeated pairs in a ratings file); pairs are drawn until that many distinct ones are found. They are written once as
  parquet into ``--data-dir`` and reused. They are NOT real data: they have real data's shape, not its content.

The FLOOR is the least memory traffic of an MF step, timed on the same tables (the model's own user and item
weights), the same batch size and the same training ids as one epoch (one epoch's batches, materialised beforehand): per
batch, ``index_select`` of the users' and the items' rows and ``index_add_`` of their gradients (each side's rows
scattered into a gradient buffer of the table's shape). The epoch time is the trainer's training loop (batches
+ steps, evaluation excluded), bracketed by a wrapper of the run's batch source. Each epoch is followed by one
floor pass (a trainer callback), so epochs and floors alternate and machine load hits both; the ratio is the
median epoch time over the median floor time (wall clock; the process CPU time ratio beside it). Target: an
epoch within 3x of the floor at >= 10^6 ratings.

``--profile-size`` (default 10^6): one more epoch at that size and the first batch size, under
``torch.profiler`` (CPU, started and stopped around the training loop only); the page lists the top operators
by self CPU time.

``--sparse``: every size and batch size is also trained with sparse tables and lazy Adam (``embeddings.sparse=true
train.optimizer=sparse-adam``: each step's gradient and optimizer update touch only the rows of the batch; see
:mod:`embreg.optim.lazy_adam`), on the same data, with its own floor passes; the page sets the dense and the sparse
epoch / floor ratios side by side (and profiles the sparse variant too). Without it the script measures the dense
recipe only, as before.

    python benchmarks/scale_mf_epoch.py --threads 2 --sizes ml-100k 1000000 10000000 --batch-sizes 1024 --reps 3
    python benchmarks/scale_mf_epoch.py --threads 1 --sizes ml-100k 1000000 10000000 --batch-sizes 1024 8192 \
        --reps 3 --sparse

writes ``scale-mf-epoch.json``, ``README.md`` (the page) and ``summary.json`` (for the results hub) into
``--out-dir`` (default ``docs/results/scale-mf-epoch``). ``--quick``: one tiny synthetic size, a smoke run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from embreg.studies.hub import write_benchmark_summary

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "scale-mf-epoch"
DATA_DIR = ROOT / "runs" / "scale-mf-epoch-data"
TARGET = 3.0  # an epoch within 3x of the floor at >= 10^6 ratings
TARGET_FROM = 10**6
KNOWN_SHAPES = {10**6: (6040, 3706), 10**7: (69878, 10677)}  # ML-1M's and ML-10M's users x items
SPARSE_OVERRIDES = ["embeddings.sparse=true", "train.optimizer=sparse-adam"]  # the --sparse variant
VARIANT_OVERRIDES = {"dense": [], "sparse": SPARSE_OVERRIDES, "fused": [*SPARSE_OVERRIDES, "train.fused_step=true"]}
VARIANT_TEXT = {"dense": "dense / Adam", "sparse": "sparse / lazy Adam", "fused": "sparse / lazy Adam, fused step"}


# ------------------------------------------------------------------------------------------------ SYNTHETIC data
def synthetic_shape(ratings: int) -> tuple[int, int]:
    """Users x items for a SYNTHETIC data set of ``ratings`` ratings (ML-1M / ML-10M counts, else scaled)."""
    if ratings in KNOWN_SHAPES:
        return KNOWN_SHAPES[ratings]
    scale = (ratings / 10**6) ** 0.5
    return max(20, round(6040 * scale)), max(20, round(3706 * scale))


def _zipf_sampler(n: int, exponent: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(cdf over popularity ranks, rank -> id) of a Zipf popularity over ``n`` ids with shuffled ranks."""
    weights = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    return np.cumsum(weights / weights.sum()), rng.permutation(n)


def write_synthetic_ratings(
    path: Path, ratings: int, users: int, items: int, user_zipf: float, item_zipf: float, seed: int = 0
) -> None:
    """Writes a SYNTHETIC ratings parquet (``user_id``, ``item_id``, ``rating``): ``ratings`` distinct (user, item)
    pairs of Zipf users and items (drawn until that many distinct pairs are found; the first draw of a pair kept),
    ratings 1..5 = round(3.5 + user offset + item offset + noise), clipped."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    user_cdf, user_ids = _zipf_sampler(users, user_zipf, rng)
    item_cdf, item_ids = _zipf_sampler(items, item_zipf, rng)
    user_offset = rng.normal(0.0, 0.5, users)
    item_offset = rng.normal(0.0, 0.5, items)
    if ratings > users * items:
        raise ValueError(f"{ratings} distinct ratings do not fit {users} x {items} users x items")
    pairs = np.empty(0, dtype=np.int64)
    while len(pairs) < ratings:
        draw = max(ratings - len(pairs), 1024) * 2
        u = user_ids[np.minimum(np.searchsorted(user_cdf, rng.random(draw)), users - 1)]
        i = item_ids[np.minimum(np.searchsorted(item_cdf, rng.random(draw)), items - 1)]
        pairs = np.concatenate([pairs, u.astype(np.int64) * items + i])
        _, first = np.unique(pairs, return_index=True)
        pairs = pairs[np.sort(first)]  # distinct pairs in the order they were drawn
    pairs = pairs[:ratings]
    u, i = pairs // items, pairs % items
    r = np.clip(np.rint(3.5 + user_offset[u] + item_offset[i] + rng.normal(0.0, 1.0, ratings)), 1, 5)
    table = pa.table({"user_id": u.astype(np.int32), "item_id": i.astype(np.int32), "rating": r.astype(np.float32)})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def synthetic_path(data_dir: Path, ratings: int, user_zipf: float, item_zipf: float) -> Path:
    """The parquet of a SYNTHETIC size (written on first use, reused after)."""
    users, items = synthetic_shape(ratings)
    path = data_dir / f"synthetic-{ratings}-{users}x{items}-zipf{user_zipf:g}-{item_zipf:g}-distinct-seed0.parquet"
    if not path.exists():
        started = time.perf_counter()
        write_synthetic_ratings(path, ratings, users, items, user_zipf, item_zipf)
        print(f"wrote {path} ({time.perf_counter() - started:.1f} s)", flush=True)
    return path


# ------------------------------------------------------------------------------------------------- measurement
class TimedBatches:
    """A run's batch source that records the wall and process-CPU seconds of each epoch's whole loop (from the
    first batch's making to the end of the last step), and can run a profiler over exactly that loop."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.profiler: Any = None

    def __len__(self) -> int:
        return len(self.inner)

    def epoch(self, epoch: int) -> Iterator[dict[str, torch.Tensor]]:
        if self.profiler is not None:
            self.profiler.start()
        wall, cpu = time.perf_counter(), time.process_time()
        yield from self.inner.epoch(epoch)  # the trainer's step runs between yields; it resumes us after the last
        self.wall.append(time.perf_counter() - wall)
        self.cpu.append(time.process_time() - cpu)
        if self.profiler is not None:
            self.profiler.stop()


class Floor:
    """``index_select`` + ``index_add_`` over one epoch's batches on the model's own user and item tables."""

    def __init__(self, users: torch.Tensor, items: torch.Tensor, batches: list[tuple[torch.Tensor, torch.Tensor]]):
        self.users, self.items, self.batches = users, items, batches
        self.user_grad, self.item_grad = torch.zeros_like(users), torch.zeros_like(items)
        self.wall: list[float] = []
        self.cpu: list[float] = []

    @torch.no_grad()
    def run(self, record: bool = True) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        for user_ids, item_ids in self.batches:
            user_rows = self.users.index_select(0, user_ids)
            item_rows = self.items.index_select(0, item_ids)
            self.user_grad.index_add_(0, user_ids, item_rows)  # d(<p_u, q_i>)/d p_u = q_i: the rows a step scatters
            self.item_grad.index_add_(0, item_ids, user_rows)
        if record:
            self.wall.append(time.perf_counter() - wall)
            self.cpu.append(time.process_time() - cpu)


def recipe_overrides(
    size: str, path: Path | None, dim: int, batch: int, epochs: int, threads: int, variant: str = "dense"
) -> list[str]:
    overrides = [
        f"model.dim={dim}",
        f"train.batch_size={batch}",
        f"train.epochs={epochs}",
        "train.patience=null",
        "train.progress=false",
        f"train.threads={threads}",
        "train.device=cpu",
    ]
    if path is not None:
        overrides.append(f"data.path={path}")
    return overrides + VARIANT_OVERRIDES[variant]


def measure(recipe_overrides_: list[str], reps: int, prepared: Any = None) -> tuple[dict[str, Any], Any]:
    """Trains ``reps`` epochs of the ``mf`` recipe, a floor pass after each; returns the timings and the data."""
    built = build_run(load_recipe("mf", recipe_overrides_), prepared)
    model = built.model
    timed = TimedBatches(built.batches)
    built.batches = timed
    floor_batches = [(b["user"], b["item"]) for b in built.batches.inner.epoch(10**6)]
    floor = Floor(model.user_embedding.weight.detach(), model.item_embedding.weight.detach(), floor_batches)
    floor.run(record=False)  # warm-up: first touch of the gradient buffers
    trainer = built.trainer(None, callbacks=[lambda trainer, record: floor.run()])
    fit = trainer.fit()
    ratings = built.prepared.ratings
    result = {
        "ratings": len(ratings),
        "users": int(ratings.num_users),
        "items": int(ratings.num_items),
        "train_rows": int(built.prepared.split["train"].size),
        "batches_per_epoch": len(timed),
        "epoch_wall_s": timed.wall,
        "epoch_cpu_s": timed.cpu,
        "floor_wall_s": floor.wall,
        "floor_cpu_s": floor.cpu,
        "trainer_epoch_seconds": [h["seconds"] for h in fit.history],
        "val_rmse": [h.get("val_rmse") for h in fit.history],
    }
    med = {k: statistics.median(result[k]) for k in ("epoch_wall_s", "epoch_cpu_s", "floor_wall_s", "floor_cpu_s")}
    result.update({f"median_{k}": v for k, v in med.items()})
    result["ratio_wall"] = med["epoch_wall_s"] / med["floor_wall_s"]
    result["ratio_cpu"] = med["epoch_cpu_s"] / med["floor_cpu_s"]
    result["paired_ratios_wall"] = [e / f for e, f in zip(timed.wall, floor.wall)]
    result["epoch_rows_per_s"] = result["train_rows"] / med["epoch_wall_s"]
    result["floor_rows_per_s"] = result["train_rows"] / med["floor_wall_s"]
    table_params = sum(p.numel() for p in model.parameters())
    result["model_parameters"] = table_params
    return result, built.prepared


def profile_epoch(recipe_overrides_: list[str], prepared: Any, top: int) -> tuple[dict[str, Any], Any]:
    """One epoch (``train.epochs=1``) of the recipe under torch.profiler, around the training loop only; returns
    the profile and the data."""
    built = build_run(load_recipe("mf", recipe_overrides_), prepared)
    timed = TimedBatches(built.batches)
    built.batches = timed
    timed.profiler = profile(activities=[ProfilerActivity.CPU])
    built.trainer(None).fit()
    events = timed.profiler.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    rows = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)
    inclusive = {e.key: e.cpu_time_total / 1e6 for e in events if e.key.startswith(("Optimizer.", "autograd::"))}
    result = {
        "epoch_wall_s": timed.wall[0],
        "profiled_self_cpu_s": total / 1e6,
        "steps": len(timed),
        "top": [
            {
                "op": e.key,
                "self_cpu_s": e.self_cpu_time_total / 1e6,
                "share": e.self_cpu_time_total / total,
                "calls": e.count,
                "self_us_per_call": e.self_cpu_time_total / max(e.count, 1),
            }
            for e in rows[:top]
        ],
        "inclusive_s": inclusive,
    }
    return result, built.prepared


# ---------------------------------------------------------------------------------------------------- the page
OPTIMIZER_CLASS = {"dense": "Adam", "sparse": "LazyAdam"}  # the profiler names Optimizer.step#<class>.step
EMBEDDING_BACKWARD = "autograd::engine::evaluate_function: EmbeddingBackward0"


def _size_label(size: str, ratings: int) -> str:
    return "ML-100k (real)" if size == "ml-100k" else f"SYNTHETIC {ratings:,}"


def _variant(record: dict[str, Any]) -> str:
    """``dense`` or ``sparse`` (records written before ``--sparse`` existed are dense)."""
    return str(record.get("variant", "dense"))


def _optimizer_keys(variant: str) -> tuple[str, str]:
    """The profiler's names of the optimizer's step and zero_grad for a variant."""
    name = OPTIMIZER_CLASS[variant]
    return f"Optimizer.step#{name}.step", f"Optimizer.zero_grad#{name}.zero_grad"


def profile_breakdown(prof: dict[str, Any]) -> dict[str, float]:
    """CPU seconds of the profiled epoch by part: the optimizer's step, the embedding backward, zero_grad and the
    rest."""
    inclusive = prof["inclusive_s"]
    step, zero_grad = _optimizer_keys(_variant(prof))
    parts = {
        "adam_step": inclusive.get(step, 0.0),
        "embedding_backward": inclusive.get(EMBEDDING_BACKWARD, 0.0),
        "zero_grad": inclusive.get(zero_grad, 0.0),
    }
    parts["rest"] = max(prof["profiled_self_cpu_s"] - sum(parts.values()), 0.0)
    return parts


def load_runs(folder: Path) -> list[dict[str, Any]]:
    """Every ``scale-mf-epoch*.json`` run record in ``folder``, by thread count."""
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("scale-mf-epoch*.json"))]
    return sorted(runs, key=lambda r: r["meta"]["threads"])


def page(runs: list[dict[str, Any]]) -> str:
    first = runs[0]["meta"]
    lines = [
        "# MF epoch time at scale: ML-100k and SYNTHETIC 10^6 / 10^7 ratings against a memory floor",
        "",
        "`benchmarks/scale_mf_epoch.py`. Biased MF (`mf` recipe: squared loss, "
        f"L2, Adam; dim {first['dim']}) trained through the library (`build_run` + `Trainer.fit`, `data.path=` a "
        "parquet for the synthetic sizes). **The 10^6 and 10^7 data sets are SYNTHETIC**: ML-1M's and ML-10M's "
        f"numbers of users and items, Zipf user and item popularity (exponents {first['user_zipf']} and "
        f"{first['item_zipf']}), each (user, item) pair once, ratings from user and item offsets plus noise; only "
        "ML-100k is real.",
        "",
        "Floor: per batch of the epoch (same ids, same batch size, the model's own tables), `index_select` of the "
        "users' and items' rows plus `index_add_` of their gradients: the least memory traffic an MF step has. "
        "Epoch: the trainer's training loop (making the batches + forward + backward + optimizer step; evaluation "
        "excluded). "
        "Each epoch is followed by one floor pass, so they alternate; ratio = median epoch / median floor (wall "
        "clock; process CPU time beside it; per-epoch ratios listed).",
        "",
        "Variants (column *tables / optimizer*): **dense / Adam** is the recipe as shipped (`nn.Embedding` builds a "
        "dense gradient of each whole table and Adam updates every row each step); **sparse / lazy Adam** "
        "(`--sparse`) trains the same model with `embeddings.sparse=true train.optimizer=sparse-adam`: sparse "
        "gradients holding the batch's rows only, and lazy Adam updating only those rows and their moments (rows "
        "absent from a batch keep their moments, so its numbers differ slightly from dense Adam's); **sparse / lazy "
        "Adam, fused step** (`--fused`) is the sparse variant with `train.fused_step=true`: each step is one C++ "
        "call (`embreg.models.mf_fused_step`: predictions, loss, each distinct row's gradient, lazy Adam on the "
        "rows and Adam on the biases), the same step up to float rounding. The user and item bias tables stay "
        "dense in all three.",
        "",
        "The machine is a shared 2-core VM; each run's state is noted beside its command below. Only the ratios, "
        "measured within one run with epochs and floors interleaved, are read.",
        "",
        "Runs:",
        "",
    ]
    for run in runs:
        meta = run["meta"]
        lines.append(
            f"* {meta['threads']} torch thread(s): `{meta['command']}` ({meta['machine_text']}; torch "
            f"{meta['torch']}; load average at the end {meta['load_average_at_end']})"
        )
    lines += [
        "",
        f"## Epoch / floor (target: <= {TARGET:g}x at >= {TARGET_FROM:,} ratings)",
        "",
        "| data | ratings | users x items | parameters | tables / optimizer | threads | batch | steps | epoch (s) | "
        "floor (s) | **epoch / floor** | per-epoch ratios | CPU-time ratio | ms / step | floor ms / batch | target |",
        "|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|",
    ]
    for run in runs:
        for r in run["records"]:
            target = "—" if r["ratings"] < TARGET_FROM else ("pass" if r["ratio_wall"] <= TARGET else "**fail**")
            paired = ", ".join(f"{x:.1f}" for x in r["paired_ratios_wall"])
            steps = r["batches_per_epoch"]
            lines.append(
                f"| {_size_label(r['size'], r['ratings'])} | {r['ratings']:,} | {r['users']:,} x {r['items']:,} | "
                f"{r['model_parameters']:,} | {VARIANT_TEXT[_variant(r)]} | {run['meta']['threads']} | "
                f"{r['batch_size']} | {steps:,} | "
                f"{r['median_epoch_wall_s']:.3f} | {r['median_floor_wall_s']:.4f} | **{r['ratio_wall']:.1f}x** | "
                f"{paired} | {r['ratio_cpu']:.1f}x | {1e3 * r['median_epoch_wall_s'] / steps:.2f} | "
                f"{1e3 * r['median_floor_wall_s'] / steps:.3f} | {target} |"
            )
    lines += side_by_side(runs)
    lines += ["", "Validation RMSE after each epoch (a sanity check that the runs trained):", ""]
    for run in runs:
        for r in run["records"]:
            rmse = ", ".join("—" if v is None else f"{v:.3f}" for v in r["val_rmse"])
            label = _size_label(r["size"], r["ratings"])
            lines.append(
                f"* {label}, {VARIANT_TEXT[_variant(r)]}, {run['meta']['threads']} thread(s), batch "
                f"{r['batch_size']}: {rmse}"
            )
    for run in runs:
        for prof in (run.get("profile"), run.get("profile_sparse")):
            if prof:
                lines += profile_section(run, prof)
    readings = [run["reading"] for run in runs if run.get("reading")]
    if readings:
        lines += ["", "## Reading"]
        for text in readings:
            lines += ["", text]
    lines += [
        "",
        "## Files",
        "",
        *(
            f"* `scale-mf-epoch-{run['meta']['tag']}.json`: every timing, the profile and the command of the "
            f"{run['meta']['threads']}-thread run."
            for run in runs
        ),
        "",
    ]
    return "\n".join(lines)


def side_by_side(runs: list[dict[str, Any]]) -> list[str]:
    """The epoch / floor ratios of the variants of each size, thread count and batch size, side by side (nothing
    when no run measured more than the dense recipe)."""
    rows = []
    for run in runs:
        by_key: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
        for r in run["records"]:
            by_key.setdefault((r["size"], r["batch_size"]), {})[_variant(r)] = r
        rows += [(run, v) for v in by_key.values() if len(v) > 1 and "dense" in v]
    if not rows:
        return []
    shown = [v for v in VARIANT_TEXT if any(v in measured for _, measured in rows)]
    lines = [
        "",
        f"## The variants side by side (target: <= {TARGET:g}x at >= {TARGET_FROM:,} ratings)",
        "",
        "Each row measured in one run, on the same data and batches, each variant with its own interleaved floor "
        "passes. Epoch seconds, then each variant's epoch / floor ratio.",
        "",
        "| data | threads | batch | "
        + " | ".join(f"{VARIANT_TEXT[v]} epoch (s)" for v in shown)
        + " | "
        + " | ".join(f"**{VARIANT_TEXT[v]} / floor**" for v in shown)
        + " | best target |",
        "|---|---:|---:|" + "---:|" * (2 * len(shown)) + "---|",
    ]
    for run, measured in rows:
        dense = measured["dense"]
        best = min(r["ratio_wall"] for r in measured.values())
        target = "—" if dense["ratings"] < TARGET_FROM else ("pass" if best <= TARGET else "**fail**")
        seconds = [f"{measured[v]['median_epoch_wall_s']:.3f}" if v in measured else "—" for v in shown]
        ratios = [f"**{measured[v]['ratio_wall']:.1f}x**" if v in measured else "—" for v in shown]
        lines.append(
            f"| {_size_label(dense['size'], dense['ratings'])} | {run['meta']['threads']} | {dense['batch_size']} | "
            + " | ".join(seconds + ratios)
            + f" | {target} |"
        )
    return lines


def profile_section(run: dict[str, Any], prof: dict[str, Any]) -> list[str]:
    """The page's section on one profiled epoch (dense or sparse variant)."""
    variant = _variant(prof)
    step, _ = _optimizer_keys(variant)
    if variant == "sparse":
        step_text = f"lazy Adam step, the batch's rows (`{step}`)"
        backward_text = "embedding backward (sparse gradient: the batch's rows)"
    else:
        step_text = f"Adam step over the whole tables (`{step}`)"
        backward_text = "embedding backward (dense (N, D) gradient per table)"
    parts = profile_breakdown(prof)
    total = prof["profiled_self_cpu_s"]
    lines = [
        "",
        f"## Where an epoch's time goes: {prof['label']}, {VARIANT_TEXT[variant]}, batch {prof['batch_size']}, "
        f"{run['meta']['threads']} thread(s) (torch.profiler)",
        "",
        f"One epoch ({prof['steps']:,} steps) profiled around the training loop only: {prof['epoch_wall_s']:.2f} s "
        f"wall under the profiler, {total:.2f} s of operator self CPU time.",
        "",
        "| part (inclusive CPU time) | seconds | share |",
        "|---|---:|---:|",
        f"| {step_text} | {parts['adam_step']:.3f} | {parts['adam_step'] / total:.0%} |",
        f"| {backward_text} | {parts['embedding_backward']:.3f} | {parts['embedding_backward'] / total:.0%} |",
        f"| `zero_grad` | {parts['zero_grad']:.3f} | {parts['zero_grad'] / total:.0%} |",
        f"| the rest (batch making, forward, loss, other backward nodes) | {parts['rest']:.3f} | "
        f"{parts['rest'] / total:.0%} |",
        "",
        "Top operators by self CPU time:",
        "",
        "| operator | self CPU (s) | share | calls | self µs / call |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in prof["top"]:
        lines.append(
            f"| `{row['op']}` | {row['self_cpu_s']:.3f} | {row['share']:.1%} | {row['calls']:,} | "
            f"{row['self_us_per_call']:.1f} |"
        )
    return lines


def write_summary(out_dir: Path, runs: list[dict[str, Any]]) -> None:
    """One claim per size >= TARGET_FROM, batch size and thread count: the fastest variant's epoch / floor ratio
    against the target, the other variants' ratios beside it."""
    claims = []
    for run in runs:
        meta = run["meta"]
        by_key: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for r in run["records"]:
            if r["ratings"] >= TARGET_FROM:
                by_key.setdefault((r["size"], r["batch_size"]), []).append(r)
        for records in by_key.values():
            best = min(records, key=lambda r: r["ratio_wall"])
            others = "; ".join(f"{VARIANT_TEXT[_variant(r)]} {r['ratio_wall']:.1f}x" for r in records if r is not best)
            claims.append(
                {
                    "claim": f"An MF epoch is within {TARGET:g}x of the index_select + index_add_ floor "
                    f"({_size_label(best['size'], best['ratings'])} ratings, batch {best['batch_size']}, dim "
                    f"{meta['dim']}, {meta['threads']} thread(s))",
                    "reading": f"{VARIANT_TEXT[_variant(best)]}: epoch {best['median_epoch_wall_s']:.2f} s vs floor "
                    f"{best['median_floor_wall_s']:.3f} s, {best['ratio_wall']:.1f}x"
                    + (f" (other variants: {others})" if others else ""),
                    "verdict": "met" if best["ratio_wall"] <= TARGET else "not met",
                    "p": None,
                }
            )
    meta = runs[0]["meta"]
    write_benchmark_summary(
        out_dir,
        "scale-mf-epoch",
        "MF epoch time at scale against a memory floor",
        "sse-stochastic-shared-embeddings.txt",
        claims,
        meta["machine_text"].split(", ")[0] + f" (shared), torch {meta['torch']}",
        meta["command"],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", nargs="+", default=["ml-100k", "1000000", "10000000"], help="ml-100k and/or SYNTHETIC ratings"
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1024])
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3, help="epochs (each followed by a floor pass) per size")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--user-zipf", type=float, default=0.5, help="Zipf exponent of SYNTHETIC user activity")
    parser.add_argument("--item-zipf", type=float, default=0.8, help="Zipf exponent of SYNTHETIC item popularity")
    parser.add_argument("--profile-size", default="1000000", help="size profiled for one epoch ('': none)")
    parser.add_argument("--profile-top", type=int, default=15)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="SYNTHETIC parquet cache")
    parser.add_argument("--quick", action="store_true", help="one tiny SYNTHETIC size: a smoke run")
    parser.add_argument(
        "--sparse",
        action="store_true",
        help="also train every size and batch size with sparse tables and lazy Adam (embeddings.sparse=true "
        "train.optimizer=sparse-adam), set side by side with the dense recipe",
    )
    parser.add_argument(
        "--fused",
        action="store_true",
        help="also train every size and batch size with the fused MF step on sparse tables (the --sparse "
        "variant plus train.fused_step=true: one C++ call per step, embreg.models.mf_fused_step)",
    )
    parser.add_argument(
        "--tag", default=None, help="names this run's record scale-mf-epoch-TAG.json (default: threadsN)"
    )
    parser.add_argument("--reading", default="", help="text for the page's Reading section (kept in the record)")
    parser.add_argument(
        "--page-only",
        action="store_true",
        help="measure nothing: rebuild README.md and summary.json from the records in --out-dir (with --reading: "
        "first store it in the record named by --tag)",
    )
    parser.add_argument("--note", default="", help="free text about the machine's state, kept with the results")
    parser.add_argument("--out-dir", type=Path, default=RESULTS, help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.batch_sizes, args.dim, args.reps = ["20000"], [256], 16, 2
        args.profile_size, args.profile_top = "20000", 5
    tag = args.tag or f"threads{args.threads}"
    if args.page_only:
        return rebuild_page(args.out_dir, tag if args.reading else None, args.reading)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    records: list[dict[str, Any]] = []
    prepared_by_size: dict[str, Any] = {}
    paths: dict[str, Path | None] = {}

    def path_of(size: str) -> Path | None:
        if size not in paths:
            synthetic = size != "ml-100k"
            paths[size] = (
                synthetic_path(args.data_dir, int(size), args.user_zipf, args.item_zipf) if synthetic else None
            )
        return paths[size]

    variants = ["dense"] + (["sparse"] if args.sparse else []) + (["fused"] if args.fused else [])
    for size in args.sizes:
        for batch in args.batch_sizes:
            for variant in variants:
                overrides = recipe_overrides(size, path_of(size), args.dim, batch, args.reps, args.threads, variant)
                record, prepared = measure(overrides, args.reps, prepared_by_size.get(size))
                prepared_by_size[size] = prepared
                record.update(
                    {
                        "size": size,
                        "synthetic": size != "ml-100k",
                        "batch_size": batch,
                        "variant": variant,
                        "overrides": overrides,
                    }
                )
                records.append(record)
                print(
                    f"{size:>9} batch {batch} {variant:>6}: epoch {record['median_epoch_wall_s']:.3f} s, floor "
                    f"{record['median_floor_wall_s']:.4f} s, ratio {record['ratio_wall']:.1f}x "
                    f"(CPU {record['ratio_cpu']:.1f}x)",
                    flush=True,
                )
    result: dict[str, Any] = {"records": records}
    if args.profile_size:
        size, batch = args.profile_size, args.batch_sizes[0]
        for variant in [v for v in variants if v != "fused"]:  # the kernel is one call: nothing to profile
            overrides = recipe_overrides(size, path_of(size), args.dim, batch, 1, args.threads, variant)
            prof, prepared_by_size[size] = profile_epoch(overrides, prepared_by_size.get(size), args.profile_top)
            ratings = len(prepared_by_size[size].ratings)
            prof.update(
                {
                    "size": size,
                    "batch_size": batch,
                    "variant": variant,
                    "label": _size_label(size, ratings) + " ratings",
                }
            )
            result["profile" if variant == "dense" else "profile_sparse"] = prof
    command = "python " + shlex.join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])])
    machine = f"{os.cpu_count()}-core {platform.machine()} CPU, {args.threads} torch thread(s), no GPU"
    if args.note:
        machine += f" ({args.note})"
    load = ""
    if os.path.exists("/proc/loadavg"):
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
    result["meta"] = {
        "command": command,
        "tag": tag,
        "machine_text": machine,
        "load_average_at_end": load,
        "platform": platform.platform(),
        "torch": torch.__version__,
        "dim": args.dim,
        "reps": args.reps,
        "threads": args.threads,
        "user_zipf": args.user_zipf,
        "item_zipf": args.item_zipf,
        "target": TARGET,
        "seconds": time.perf_counter() - started,
    }
    if args.reading:
        result["reading"] = args.reading
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / f"scale-mf-epoch-{tag}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}/scale-mf-epoch-{tag}.json")
    return rebuild_page(out)


def rebuild_page(out: Path, tag: str | None = None, reading: str = "") -> int:
    """README.md and summary.json of ``out`` from its records (after storing ``reading`` in record ``tag``)."""
    if tag is not None:
        path = out / f"scale-mf-epoch-{tag}.json"
        record = json.loads(path.read_text())
        record["reading"] = reading
        path.write_text(json.dumps(record, indent=1) + "\n")
    runs = load_runs(out)
    if not runs:
        raise SystemExit(f"no scale-mf-epoch*.json record in {out}")
    (out / "README.md").write_text(page(runs))
    write_summary(out, runs)
    print(f"rebuilt {out}/README.md and summary.json from {len(runs)} run(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
